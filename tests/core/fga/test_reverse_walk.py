"""ListObjects' reverse walk over a store read on demand (core.fga.reverse_walk): each
round goes on from where the last one ended, a read that missed is walked once answered,
and a round stopped in the middle leaves the next to start afresh. Every answer is the
one the store gives directly."""

from __future__ import annotations

from bastion.core.fga.list_objects import ListResult, list_objects
from bastion.core.fga.on_demand import MISSED, RoundReader, Speculation, answer_from
from bastion.core.fga.request import Deadline, RequestOptions
from bastion.core.fga.reverse_walk import ReverseWalk
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem
from tests.core.fga.support import NESTED, key, world

DEPTH = 6


def chain() -> tuple[TypeSystem, MemoryTupleReader]:
    """A chain of folders under one a group sees, two documents in each."""
    tuples = ["folder:f0#viewer@group:g#member", "group:g#member@user:anne"]
    tuples += [f"folder:f{n}#parent@folder:f{n - 1}" for n in range(1, DEPTH)]
    tuples += [f"doc:{n}_{d}#parent@folder:f{n}" for n in range(DEPTH) for d in range(2)]
    return world(NESTED, *tuples)


def driven(
    speculation: Speculation[ListResult], store: MemoryTupleReader
) -> Speculation[ListResult]:
    """``speculation`` run to its result, each round's reads answered by ``store``."""
    while reads := speculation.step():
        for read in reads:
            speculation.answer(read, answer_from(store, read))
    return speculation


def rounds(
    ts: TypeSystem, store: MemoryTupleReader, user: str, options: RequestOptions | None = None
) -> tuple[ListResult, list[object]]:
    """ListObjects in rounds over ``store``; the result, and each round's carried walk."""
    walks: list[object] = []

    def run(reader: RoundReader) -> ListResult:
        try:
            return list_objects(ts, reader, "doc", "viewer", user, options)
        finally:
            walks.extend(reader.carried.values())

    return driven(Speculation(run, lambda _: None, "s"), store).result, walks


def test_each_round_goes_on_with_the_walk_of_the_last() -> None:
    ts, store = chain()
    result, walks = rounds(ts, store, "user:anne")
    assert result == list_objects(ts, store, "doc", "viewer", "user:anne")
    assert len(result.items) == 2 * DEPTH
    # A round a level of the chain, and one walk all along.
    assert len(walks) > DEPTH
    assert all(isinstance(walk, ReverseWalk) for walk in walks)
    assert len({id(walk) for walk in walks}) == 1


def test_a_round_stopped_by_the_result_bound_leaves_the_next_to_start_afresh() -> None:
    ts, store = chain()
    options = RequestOptions(max_results=3)
    result, walks = rounds(ts, store, "user:anne", options)
    assert result.truncated
    assert len(result.items) == 3
    assert set(result.items) <= set(list_objects(ts, store, "doc", "viewer", "user:anne").items)
    # The rounds once the bound was reached stopped their walk in the middle.
    assert len({id(walk) for walk in walks}) > 1


def test_a_read_that_missed_through_contextual_tuples_is_walked_again() -> None:
    """A contextual tuple answers at once where the store's answer is missing: the
    round's combined answer is not empty, and the store's part is still walked later."""
    ts, store = chain()
    contextual = (key("doc:extra#parent@folder:f2"), key("group:g#member@user:bob"))
    options = RequestOptions(contextual_tuples=contextual)
    result, _ = rounds(ts, store, "user:bob", options)
    direct = list_objects(ts, store, "doc", "viewer", "user:bob", options)
    assert result == direct
    assert "doc:extra" in result.items
    assert len(result.items) == 2 * DEPTH + 1


def test_a_read_that_missed_is_told_apart_from_an_empty_answer() -> None:
    answers: dict[tuple[object, ...], tuple[TupleKey, ...]] = {
        ("s", "read_by_user", "user:anne", "doc"): ()
    }
    reader = RoundReader("s", answers, lambda _: None)
    assert reader.read_by_user("user:anne", "doc") == ()
    assert reader.read_by_user("user:anne", "doc") is not MISSED
    assert not reader.missed_by_user("user:anne", "doc")
    assert reader.read_by_user("user:bob", "doc") is MISSED
    assert reader.missed_by_user("user:bob", "doc")


def test_once_the_deadline_passed_no_round_walks_further() -> None:
    """The reads a round missed are not walked after the deadline: the search answers
    with what it had, as when each round walked from the start."""
    ts, store = chain()
    now = [0.0]
    options = RequestOptions(max_results=0, deadline=Deadline.after(50, lambda: now[0]))
    count = [0]

    def run(reader: RoundReader) -> ListResult:
        count[0] += 1
        if count[0] == 3:
            now[0] = 100.0
        return list_objects(ts, reader, "doc", "viewer", "user:anne", options)

    speculation = driven(Speculation(run, lambda _: None, "s"), store)
    result = speculation.result
    assert result.timed_out
    assert len(result.items) < 2 * DEPTH
    assert speculation.rounds == 3
