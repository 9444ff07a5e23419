"""DSL parsing (errors with line and column), JSON shape, printing round-trips."""

from __future__ import annotations

import pytest

from bastion.core.fga.dsl_lexer import DslSyntaxError, strip_comments
from bastion.core.fga.dsl_parser import parse_dsl, parse_model
from bastion.core.fga.dsl_printer import UnsupportedDslError, print_model
from bastion.core.fga.model import (
    ComputedUserset,
    Difference,
    Intersection,
    RelationRef,
    This,
    TupleToUserset,
    Union,
    model_from_json,
    model_to_json,
)

HEADER = "model\n  schema 1.1\n"


def relation_of(dsl: str, type_name: str, relation: str):  # type: ignore[no-untyped-def]
    model = parse_model(HEADER + dsl)
    [typedef] = [t for t in model.type_definitions if t.name == type_name]
    return typedef.relations[relation]


def test_every_rewrite_kind_compiles_to_its_node() -> None:
    dsl = """type user
type folder
  relations
    define viewer: [user]
type doc
  relations
    define parent: [folder]
    define owner: [user, user:*, folder#viewer with cond]
    define editor: owner
    define viewer: viewer from parent
    define both: [user] and editor
    define either: editor or owner or viewer
    define not_owner: editor but not owner
    define nested: (editor or owner) and viewer
condition cond(x: int) {
  x < 10
}
"""
    assert relation_of(dsl, "doc", "editor").rewrite == ComputedUserset("owner")
    assert relation_of(dsl, "doc", "viewer").rewrite == TupleToUserset("parent", "viewer")
    assert relation_of(dsl, "doc", "both").rewrite == Intersection(
        (This(), ComputedUserset("editor"))
    )
    assert relation_of(dsl, "doc", "either").rewrite == Union(
        (ComputedUserset("editor"), ComputedUserset("owner"), ComputedUserset("viewer"))
    )
    assert relation_of(dsl, "doc", "not_owner").rewrite == Difference(
        ComputedUserset("editor"), ComputedUserset("owner")
    )
    assert relation_of(dsl, "doc", "nested").rewrite == Intersection(
        (Union((ComputedUserset("editor"), ComputedUserset("owner"))), ComputedUserset("viewer"))
    )
    assert relation_of(dsl, "doc", "owner").directly_related == (
        RelationRef("user"),
        RelationRef("user", wildcard=True),
        RelationRef("folder", "viewer", condition="cond"),
    )


@pytest.mark.parametrize(
    ("dsl", "line", "column"),
    [
        ("type user\n", 0, 0),  # no model header
        ("model\n  schema 11\n", 1, 9),
        ("model\n  schema 1.1\ntype doc\n  relations\n    define v: a and b or c\n", 4, 22),
        ("model\n  schema 1.1\ntype doc\n  relations\n    define v: a or [user]\n", 4, 19),
        (
            "model\n  schema 1.1\ntype doc\n  relations\n    define v: a but not b but not c\n",
            4,
            26,
        ),
        ("model\n  schema 1.1\ntype doc\n  relations\n    define v: []\n", 4, 15),
        ("model\n  schema 1.1\ntype doc\n  relations\n    define v: [user:*:*]\n", 4, 21),
        ("model\n  schema 1.1\ntype doc\n  define v: [user]\n", 3, 2),
        (
            "model\n  schema 1.1\ntype doc\n  relations\n"
            "    define v: [user]\n    define v: [user]\n",
            5,
            11,
        ),
    ],
)
def test_syntax_errors_point_at_line_and_column(dsl: str, line: int, column: int) -> None:
    with pytest.raises(DslSyntaxError) as info:
        parse_dsl(dsl)
    assert (info.value.line, info.value.column) == (line, column)
    assert f"line={line}, column={column}" in str(info.value)


def test_condition_errors_are_syntax_errors() -> None:
    base = HEADER + "type user\ntype doc\n  relations\n    define v: [user with c]\n"
    with pytest.raises(DslSyntaxError, match="CONDITION_PARAM_TYPE"):
        parse_dsl(base + "condition c(x: map<map>) {\n  x\n}\n")
    with pytest.raises(DslSyntaxError, match="parameter 'x' is already defined"):
        parse_dsl(base + "condition c(x: int, x: int) {\n  x < 1\n}\n")
    with pytest.raises(DslSyntaxError, match="condition 'c' is already defined"):
        parse_dsl(base + "condition c(x: int) {\n  x < 1\n}\ncondition c(x: int) {\n  x\n}\n")


def test_comments_are_stripped_but_hashes_in_usersets_stay() -> None:
    assert strip_comments("# top\ntype a # trailing\n  define x: [g#member]") == (
        "\ntype a\n  define x: [g#member]"
    )
    model = parse_model(
        "# leading comment\n" + HEADER + "type user # a user\ntype group\n"
        "  relations\n    define member: [user, group#member] # nested\n"
    )
    assert [t.name for t in model.type_definitions] == ["user", "group"]


def test_keywords_and_extended_identifiers_are_names() -> None:
    model = parse_model(
        HEADER + "type model\ntype a.b/c\n  relations\n"
        "    define type: [model]\n    define schema: type\n"
    )
    assert [t.name for t in model.type_definitions] == ["model", "a.b/c"]
    assert model.type_definitions[1].relations["schema"].rewrite == ComputedUserset("type")


def test_condition_body_is_kept_verbatim_including_braces() -> None:
    model = parse_model(
        HEADER + "type user\ntype doc\n  relations\n    define v: [user with c]\n"
        'condition c(m: map<string>, l: list<int>) {\n  m["k"] == "{}"\n}\n'
    )
    condition = model.conditions["c"]
    assert condition.expression == 'm["k"] == "{}"'
    assert condition.parameters["m"].generic == ("TYPE_NAME_STRING",)
    assert condition.parameters["l"].type_name == "TYPE_NAME_LIST"


ROUND_TRIP = """model
  schema 1.1

type user

type group
  relations
    define member: [user, group#member]

type doc
  relations
    define blocked: [user]
    define editor: [user, user:* with ok] or member from parent
    define member: [group#member]
    define parent: [group]
    define viewer: ([user] and editor) but not blocked

condition ok(n: int, s: list<string>) {
  n < 3
}
"""


def test_printer_reproduces_canonical_text_and_json_round_trips() -> None:
    model = parse_model(ROUND_TRIP)
    assert print_model(model) == ROUND_TRIP
    as_json = model_to_json(model)
    assert model_to_json(model_from_json(as_json)) == as_json
    assert print_model(model_from_json(as_json)) == ROUND_TRIP


def test_printer_moves_direct_assignment_first_and_refuses_inexpressible() -> None:
    moved = model_from_json(
        {
            "schema_version": "1.1",
            "type_definitions": [
                {"type": "user"},
                {
                    "type": "doc",
                    "relations": {
                        "a": {"this": {}},
                        "b": {
                            "union": {
                                "child": [{"computedUserset": {"relation": "a"}}, {"this": {}}]
                            }
                        },
                    },
                    "metadata": {
                        "relations": {
                            "a": {"directly_related_user_types": [{"type": "user"}]},
                            "b": {"directly_related_user_types": [{"type": "user"}]},
                        }
                    },
                },
            ],
        }
    )
    assert "    define b: [user] or a\n" in print_model(moved)
    subtract_this = model_from_json(
        {
            "schema_version": "1.1",
            "type_definitions": [
                {
                    "type": "doc",
                    "relations": {
                        "a": {"this": {}},
                        "b": {
                            "difference": {
                                "base": {"computedUserset": {"relation": "a"}},
                                "subtract": {"this": {}},
                            }
                        },
                    },
                    "metadata": {
                        "relations": {"a": {"directly_related_user_types": [{"type": "doc"}]}}
                    },
                }
            ],
        }
    )
    with pytest.raises(UnsupportedDslError, match="'b' relation definition under the 'doc'"):
        print_model(subtract_this)


def test_json_reader_accepts_snake_case_and_camel_case() -> None:
    snake = model_from_json(
        {
            "schema_version": "1.1",
            "type_definitions": [
                {
                    "type": "d",
                    "relations": {
                        "a": {"this": {}},
                        "b": {"computed_userset": {"relation": "a"}},
                        "c": {
                            "tuple_to_userset": {
                                "tupleset": {"relation": "a"},
                                "computed_userset": {"relation": "b"},
                            }
                        },
                    },
                }
            ],
        }
    )
    camel = model_from_json(
        {
            "schemaVersion": "1.1",
            "typeDefinitions": [
                {
                    "type": "d",
                    "relations": {
                        "a": {"this": {}},
                        "b": {"computedUserset": {"relation": "a"}},
                        "c": {
                            "tupleToUserset": {
                                "tupleset": {"relation": "a"},
                                "computedUserset": {"relation": "b"},
                            }
                        },
                    },
                }
            ],
        }
    )
    assert snake == camel
