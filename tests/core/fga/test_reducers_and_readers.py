"""The reducer table of union / intersection / exclusion, and the tuple readers."""

from __future__ import annotations

import pytest

from bastion.core.fga import reducers
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.result import ALLOWED, CYCLE, DENIED, Outcome
from bastion.core.fga.tuples import CombinedReader, MemoryTupleReader, TupleKey, is_valid_object_id

ERROR = Outcome.failed(FgaError(ErrorCode.VALIDATION_ERROR, "boom"))


def thunks(*outcomes: Outcome) -> list[reducers.Thunk]:
    return [lambda o=o: o for o in outcomes]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("children", "expected"),
    [
        ((DENIED, ALLOWED), ALLOWED),
        ((ERROR, ALLOWED), ALLOWED),
        ((ERROR, DENIED), Outcome(False, False, ERROR.error)),
        ((CYCLE, DENIED), CYCLE),
        ((DENIED, DENIED), DENIED),
    ],
)
def test_union(children: tuple[Outcome, ...], expected: Outcome) -> None:
    assert reducers.union(thunks(*children)) == expected


@pytest.mark.parametrize(
    ("children", "expected"),
    [
        ((ALLOWED, ALLOWED), ALLOWED),
        ((ERROR, DENIED), DENIED),
        ((ALLOWED, CYCLE), CYCLE),
        ((ALLOWED, ERROR), ERROR),
    ],
)
def test_intersection(children: tuple[Outcome, ...], expected: Outcome) -> None:
    assert reducers.intersection(thunks(*children)) == expected


@pytest.mark.parametrize(
    ("base", "subtract", "allowed", "error"),
    [
        (ALLOWED, DENIED, True, False),
        (ALLOWED, ALLOWED, False, False),
        (ALLOWED, CYCLE, False, False),
        (CYCLE, DENIED, False, False),
        (ERROR, ALLOWED, False, False),
        (ERROR, DENIED, False, True),
        (ALLOWED, ERROR, False, True),
    ],
)
def test_difference(base: Outcome, subtract: Outcome, allowed: bool, error: bool) -> None:
    outcome = reducers.difference(lambda: base, lambda: subtract)
    assert outcome.allowed is allowed
    assert (outcome.error is not None) is error


def test_short_circuit_skips_remaining_children() -> None:
    calls: list[str] = []

    def child(name: str, outcome: Outcome) -> reducers.Thunk:
        return lambda: (calls.append(name), outcome)[1]

    reducers.union([child("a", ALLOWED), child("b", DENIED)])
    reducers.intersection([child("c", DENIED), child("d", ALLOWED)])
    reducers.difference(child("e", DENIED), child("f", ALLOWED))
    assert calls == ["a", "c", "e"]


def test_memory_reader_indexes_and_delete() -> None:
    store = MemoryTupleReader(
        [
            TupleKey("doc:1", "viewer", "user:anne"),
            TupleKey("doc:1", "viewer", "group:x#member"),
            TupleKey("folder:1", "viewer", "user:anne"),
        ]
    )
    assert len(store) == 3
    assert [k.user for k in store.read_usersets("doc:1", "viewer")] == ["group:x#member"]
    assert {k.object for k in store.read_by_user("user:anne", "doc")} == {"doc:1"}
    revision = store.revision
    assert store.delete(TupleKey("doc:1", "viewer", "user:anne")) is True
    assert store.delete(TupleKey("doc:1", "viewer", "user:anne")) is False
    assert store.revision == revision + 1
    assert store.read_exact("doc:1", "viewer", "user:anne") == ()
    assert store.read_by_user("user:anne", "doc") == []
    # A userset tuple leaves both the tuples and the usersets of its object#relation.
    assert store.delete(TupleKey("doc:1", "viewer", "group:x#member")) is True
    assert store.read("doc:1", "viewer") == ()
    assert store.read_usersets("doc:1", "viewer") == ()
    # Usersets of a relation that had none at first are indexed on its own entry only.
    store.write(TupleKey("folder:1", "viewer", "group:y#member"))
    assert [k.user for k in store.read_usersets("folder:1", "viewer")] == ["group:y#member"]
    assert store.read_usersets("doc:2", "viewer") == ()
    assert len(store) == 2


def test_combined_reader_reads_both_sources() -> None:
    contextual = MemoryTupleReader([TupleKey("doc:1", "viewer", "user:anne", "cond")])
    store = MemoryTupleReader([TupleKey("doc:1", "viewer", "user:anne")])
    combined = CombinedReader(contextual, store)
    assert [k.condition for k in combined.read_exact("doc:1", "viewer", "user:anne")] == [
        "cond",
        "",
    ]
    assert len(combined.read("doc:1", "viewer")) == 2


@pytest.mark.parametrize(
    ("object_id", "valid"),
    [
        ("doc1", True),
        ("a|b@c.d+e/f-g_h", True),
        ("x*", True),
        ("*x", False),
        ("a#b", False),
        ("a:b", False),
        ("a b", False),
        ("", False),
    ],
)
def test_object_id_rule(object_id: str, valid: bool) -> None:
    assert is_valid_object_id(object_id) is valid
