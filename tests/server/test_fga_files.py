"""Tuple files (``bastion.fga_files``) as OpenFGA's CLI reads them: every format gives the
same tuples with the line each starts on; what cannot be read is named by line; and what
is written reads back the same."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import pytest

from bastion.core.fga.tuples import TupleKey
from bastion.fga_files import (
    Row,
    TupleFileError,
    TupleWriter,
    format_of,
    read_rows,
    tuple_object,
)

HEADER = "user_type,user_id,user_relation,relation,object_type,object_id,"
CSV = (
    HEADER
    + """condition_name,condition_context
user,anne,,viewer,doc,d1,,
group,eng,member,viewer,doc,d2,,

user,carl,,viewer,doc,"d
3",in_window,"{""grant_expiry"":""2030-01-01T00:00:00Z""}"
user,dan,,viewer,doc,d4,in_window,
"""
)
EXPECTED = [
    (2, {"user": "user:anne", "relation": "viewer", "object": "doc:d1"}),
    (3, {"user": "group:eng#member", "relation": "viewer", "object": "doc:d2"}),
    (
        5,
        {
            "user": "user:carl",
            "relation": "viewer",
            "object": "doc:d\n3",
            "condition": {"name": "in_window", "context": {"grant_expiry": "2030-01-01T00:00:00Z"}},
        },
    ),
    (
        7,
        {
            "user": "user:dan",
            "relation": "viewer",
            "object": "doc:d4",
            "condition": {"name": "in_window", "context": {}},
        },
    ),
]


def rows(text: str, file_format: str) -> list[Row]:
    return list(read_rows(io.StringIO(text, newline=""), file_format))


def fields(row: Row) -> Mapping[str, Any] | None:
    """The row's tuple as OpenFGA's object, whether it came as fields or as the tuple."""
    return tuple_object(row.key) if row.key is not None else row.fields


def test_csv_rows_carry_their_first_line() -> None:
    found = rows(CSV, "csv")
    assert [(r.line, fields(r)) for r in found] == EXPECTED
    # a row without a condition is read straight into its tuple (no fields to parse again)
    assert [r.key is not None for r in found] == ["condition" not in f for _, f in EXPECTED]


def test_csv_columns_in_any_order_and_the_optional_ones_left_out() -> None:
    text = "object_id,object_type,relation,user_id,user_type\nd1,doc,viewer,anne,user\n"
    assert [fields(r) for r in rows(text, "csv")] == [EXPECTED[0][1]]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("user_type,user_id,relation,object_type,object_id,colour", "unknown CSV column 'colour'"),
        ("user_type,user_id,object_type,object_id", "the CSV header lacks relation"),
        (
            "user_type,user_id,relation,object_type,object_id,condition_context",
            "condition_context needs a condition_name column",
        ),
    ],
)
def test_a_bad_csv_header_refuses_the_file(header: str, message: str) -> None:
    with pytest.raises(TupleFileError, match=message):
        rows(header + "\n", "csv")


def test_a_bad_csv_row_is_named_and_the_next_read() -> None:
    text = (
        "user_type,user_id,relation,object_type,object_id,condition_name,condition_context\n"
        "user,a,viewer,doc\n"
        'user,b,viewer,doc,d1,c,"{not json"\n'
        "user,c,viewer,doc,d2,,\n"
    )
    found = rows(text, "csv")
    assert [(r.line, r.problem) for r in found] == [
        (2, "4 fields where the header has 7"),
        (3, "condition_context is not JSON"),
        (4, ""),
    ]


def test_json_jsonl_and_yaml_rows_carry_their_first_line() -> None:
    items = [fields for _, fields in EXPECTED]
    pretty = json.dumps(items, indent=2)
    lines = [n + 1 for n, text in enumerate(pretty.splitlines()) if text == "  {"]
    assert [(r.line, r.fields) for r in rows(pretty, "json")] == list(
        zip(lines, items, strict=True)
    )
    jsonl = "\n".join(json.dumps(i) for i in items[:2]) + "\n\n" + json.dumps(items[2]) + "\n"
    assert [r.line for r in rows(jsonl, "jsonl")] == [1, 2, 4]
    yaml_text = (
        "# tuples\n- user: user:anne\n  relation: viewer\n  object: doc:d1\n"
        "- {user: user:b, relation: viewer, object: doc:d2}\n"
    )
    assert [r.line for r in rows(yaml_text, "yaml")] == [2, 5]


def test_broken_documents_are_named_by_line() -> None:
    with pytest.raises(TupleFileError, match="line 3: not JSON"):
        rows('[\n{"user": "user:a", "relation": "r", "object": "o:1"},\n{"user": }\n]', "json")
    with pytest.raises(TupleFileError, match="line 2: expected ',' or ']'"):
        rows('[{"user": "user:a"}\n {"user": "user:b"}]', "json")
    with pytest.raises(TupleFileError, match="one array"):
        rows('{"tuples": []}', "json")
    with pytest.raises(TupleFileError, match="one list"):
        rows("tuples: []\n", "yaml")
    assert [r.problem for r in rows("- 3\n", "yaml")] == [
        "a tuple must be an object with user, relation and object"
    ]
    assert rows("not json\n", "jsonl")[0].problem.startswith("not JSON")


def test_the_format_comes_from_the_extension_unless_given() -> None:
    assert [format_of(p) for p in ("a.csv", "a.JSON", "a.jsonl", "a.yaml", "a.yml")] == [
        "csv",
        "json",
        "jsonl",
        "yaml",
        "yaml",
    ]
    assert format_of("tuples.txt", "jsonl") == "jsonl"
    with pytest.raises(TupleFileError, match="give --format"):
        format_of("tuples.txt")
    with pytest.raises(TupleFileError, match="unknown format 'xml'"):
        format_of("a.csv", "xml")


@pytest.mark.parametrize("file_format", ["csv", "json", "jsonl", "yaml"])
def test_what_is_written_reads_back(file_format: str) -> None:
    keys = [
        TupleKey("doc:d1", "viewer", "user:anne"),
        TupleKey("doc:d2", "viewer", "group:eng#member"),
        TupleKey("doc:d3", "viewer", "user:*"),
        TupleKey("doc:d4", "viewer", "user:carl", "in_window", {"grant_expiry": "2030"}),
    ]
    for written in (keys, []):
        out = io.StringIO()
        writer = TupleWriter(out, file_format)
        for key in written:
            writer.write(key)
        writer.close()
        back = rows(out.getvalue(), file_format)
        assert [fields(r) for r in back] == [
            {"user": k.user, "relation": k.relation, "object": k.object}
            | (
                {"condition": {"name": k.condition, "context": dict(k.context or {})}}
                if k.condition
                else {}
            )
            for k in written
        ]


def test_a_csv_row_the_api_would_refuse_keeps_its_fields() -> None:
    """An empty or over-long relation is not read into a tuple: the import's validation
    parses the fields as the API does and names the problem with the API's words."""
    text = HEADER.rstrip(",") + "\nuser,anne,,,doc,d1\nuser,anne,,{},doc,d1\n".format("r" * 51)
    found = rows(text, "csv")
    assert [r.key for r in found] == [None, None]
    assert [r.fields and r.fields["relation"] for r in found] == ["", "r" * 51]
