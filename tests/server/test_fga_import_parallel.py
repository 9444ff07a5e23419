"""A large CSV file read by worker processes (``bastion.fga_import_parallel``): the same
``COPY`` text, in the same order, as one process makes from the same file; the same
problems named by the same lines; chunks cut between records only."""

from __future__ import annotations

import csv
import io

import pytest

from bastion.fga_files import csv_chunks, csv_header, csv_layout, csv_rows, read_rows
from bastion.fga_import_parallel import copy_texts
from bastion.fga_plain_csv import plain_copy_text, plain_pattern
from bastion.fga_tuple_check import BATCH, BadTuples, Validator, checked_batches
from bastion.service.fga.engine import ActiveModel
from bastion.storage.fga import StoredModel
from bastion.storage.fga_bulk_postgres import copy_text
from tests.openfga_face.conftest import MODEL_DSL

MODEL = StoredModel("01PARALLELMODEL00000000000", MODEL_DSL)
HEADER = (
    "user_type,user_id,user_relation,relation,object_type,object_id,"
    "condition_name,condition_context\n"
)
CONDITIONED = (
    'user,c{n},,viewer,folder,f{n},in_window,"{{""grant_expiry"":""2030-01-01T00:00:00Z""}}"\n'
)


def csv_file(tuples: int, bad: dict[int, str] | None = None) -> str:
    """``tuples`` lines, a conditioned one (quoted) every 97th; ``bad``: lines (by index)
    replaced."""
    lines = []
    for n in range(tuples):
        if bad and n in bad:
            lines.append(bad[n])
        elif n % 97 == 0:
            lines.append(CONDITIONED.format(n=n))
        else:
            lines.append(f"user,u{n},,member,group,g{n % 50},,\n")
    return HEADER + "".join(lines)


def one_process(text: str) -> str:
    rows = read_rows(io.StringIO(text), "csv")
    batches = checked_batches(rows, ActiveModel.load(MODEL), "t.csv")
    return "".join(copy_text(batch) for batch in batches)


def test_workers_give_the_text_one_process_gives() -> None:
    text = csv_file(3 * BATCH + 123)
    made = list(copy_texts(io.StringIO(text), MODEL, "t.csv", workers=2))
    assert sum(chunk.tuples for chunk in made) == 3 * BATCH + 123
    assert "".join(chunk.text for chunk in made) == one_process(text)


def test_problems_are_named_as_one_process_names_them() -> None:
    bad = {10: "team,x,,member,group,g1,,\n", BATCH + 7: "user,zed,,owner,doc,d1,,\n"}
    text = csv_file(2 * BATCH + 50, bad)
    with pytest.raises(BadTuples) as alone:
        one_process(text)
    given = []
    with pytest.raises(BadTuples) as workers:
        given.extend(copy_texts(io.StringIO(text), MODEL, "t.csv", workers=2))
    assert (
        workers.value.problems
        == alone.value.problems
        == [
            "t.csv:12: type 'team' not found",
            f"t.csv:{BATCH + 9}: relation 'doc#owner' not found",
        ]
    )
    assert given == []  # the first chunk holds a bad tuple: nothing passed on


def test_chunks_are_cut_between_records_only() -> None:
    """A quoted field that spans lines keeps its record whole in one chunk, and every
    chunk reads the rows (and lines) the whole file reads."""
    records = [f"user,u{n},,member,group,g1,,\n" for n in range(9)]
    records[3] = 'user,"multi\nline",,member,group,g1,,\n'
    records[6] = 'user,"a ""quoted"" id",,member,group,g1,,\n'
    text = HEADER + "".join(records)
    lines = iter(io.StringIO(text, newline=""))
    header, before = csv_header(lines)
    layout = csv_layout(header)
    chunks = list(csv_chunks(lines, before, 2))
    assert [chunk.count("\n") for _, chunk in chunks] == [2, 3, 2, 2, 1]  # record 3: one chunk
    assert [start for start, _ in chunks] == [1, 3, 6, 8, 10]
    rows = [
        row
        for start, chunk in chunks
        for row in csv_rows(io.StringIO(chunk, newline=""), layout, start)
    ]
    assert rows == list(read_rows(io.StringIO(text), "csv"))


PLAIN_HEADER = "user_type,user_id,user_relation,relation,object_type,object_id\n"


def plain_file(tuples: int, odd: dict[int, str] | None = None) -> str:
    """``tuples`` plain records of three shapes; ``odd``: lines (by index) replaced."""
    lines = []
    for n in range(tuples):
        if odd and n in odd:
            lines.append(odd[n])
        elif n % 3 == 0:
            lines.append(f"group,g{n % 40},member,viewer,folder,f{n}\n")
        else:
            lines.append(f"user,u{n}@example.com,,member,group,g{n % 50}\n")
    return PLAIN_HEADER + "".join(lines)


def test_plain_files_take_the_fast_path_to_the_same_text() -> None:
    """Chunks of plain records (one CRLF-ended among them) skip the rows and tuple keys;
    chunks with anything else (a quote, an empty line, a user of the object itself, a
    shape the model refuses, an over-long id) are read the general way: the text, the
    tuples and the problems are what one process gives."""
    alone = plain_file(4 * BATCH, {5: "user,u5,,member,group,g1\r\n"})
    assert "".join(c.text for c in copy_texts(io.StringIO(alone), MODEL, "t.csv", 2)) == (
        one_process(alone)
    )
    odd = {
        BATCH + 1: 'user,"q1",,member,group,g1\n',
        2 * BATCH + 2: "\n",
        3 * BATCH + 3: "group,g7,member,member,group,g7\n",
        3 * BATCH + 4: "user,u1,,owner,doc,d1\n",
        3 * BATCH + 5: f"user,{'u' * 600},,member,group,g1\n",
    }
    text = plain_file(4 * BATCH, odd)
    with pytest.raises(BadTuples) as alone_bad:
        one_process(text)
    with pytest.raises(BadTuples) as workers_bad:
        list(copy_texts(io.StringIO(text), MODEL, "t.csv", workers=2))
    assert workers_bad.value.problems == alone_bad.value.problems
    assert len(alone_bad.value.problems) == 3
    good = plain_file(4 * BATCH, {n: line for n, line in odd.items() if n < 3 * BATCH})
    made = list(copy_texts(io.StringIO(good), MODEL, "t.csv", workers=2))
    assert sum(chunk.tuples for chunk in made) == 4 * BATCH - 1  # the empty line
    assert "".join(chunk.text for chunk in made) == one_process(good)


@pytest.mark.parametrize(
    ("header", "records", "plain"),
    [
        (PLAIN_HEADER, "user,u1,,member,group,g1\ngroup,g1,member,viewer,folder,f1\n", True),
        (PLAIN_HEADER, "user,u1,,member,group,g1\r\nuser,u2,,member,group,g1", True),
        (HEADER, "user,u1,,member,group,g1,,\n", True),
        (HEADER, "user,u1,,viewer,folder,f1,in_window,\n", False),
        (PLAIN_HEADER, 'user,"u1",,member,group,g1\n', False),
        (PLAIN_HEADER, "user,u1,,member,group,g1\n\nuser,u2,,member,group,g1\n", False),
        (PLAIN_HEADER, "user,u:1,,member,group,g1\n", False),
        (PLAIN_HEADER, "user,u1,,member,group,g1\ruser,u2,,member,group,g1\n", False),
        (PLAIN_HEADER, "group,g1,member,member,group,g1\n", False),
        (PLAIN_HEADER, "user,u1,,member,doc,d1\n", False),
        (PLAIN_HEADER, f"user,u1,,member,group,{'g' * 600}\n", False),
        (PLAIN_HEADER, "user,u1,,member,group,g1,\n", False),
    ],
)
def test_what_takes_the_fast_path(header: str, records: str, plain: bool) -> None:
    pattern = plain_pattern(next(csv.reader([header])))
    assert pattern is not None
    made = plain_copy_text(records, 1, pattern, Validator(ActiveModel.load(MODEL)))
    assert (made is not None) == plain
    if made is not None:
        text, tuples = made
        assert text == one_process(header + records)
        assert tuples == text.count("\n") == len(records.strip().splitlines())


def test_columns_in_another_order_take_the_general_path() -> None:
    assert plain_pattern(["object_type", "object_id", "relation", "user_type", "user_id"]) is None
    assert plain_pattern(
        [" user_type", " user_id", "user_relation", "relation", "object_type", "object_id"]
    )


def test_one_worker_a_core_two_at_the_least_eight_at_the_most() -> None:
    from bastion.fga_import_parallel import MAX_WORKERS, workers_for

    assert [workers_for(n) for n in (1, 2, 4, 64)] == [2, 2, 4, MAX_WORKERS]
    assert MAX_WORKERS == 8
