"""The sans-IO evaluation: driven read by read, every API answers exactly as it does over a
synchronous reader, never asks one question twice, and runs under asyncio with an async
store that has no synchronous way in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given

from bastion.core.fga import (
    FgaError,
    MemoryTupleReader,
    TupleReader,
    TypeSystem,
    UserFilter,
    check,
    expand,
    list_objects,
    list_users,
)
from bastion.core.fga.steps import Evaluation, Read
from bastion.core.fga.tuples import TupleKey
from tests.core.fga.support import world
from tests.core.fga.test_properties import IDS, LAYERS, RELATIONS, SETTINGS, USERS, World, worlds


def stepped(run: Callable[[TupleReader], Any], store: TupleReader) -> tuple[Any, list[Read]]:
    """``run`` driven through ``Evaluation``, answering from ``store``; and what it asked."""
    evaluation = Evaluation(run)
    asked: list[Read] = []
    while (read := evaluation.step()) is not None:
        asked.append(read)
        evaluation.answer(read, read.answer_from(store))
    return evaluation.result, asked


@SETTINGS
@given(worlds(algebra=False))
def test_every_api_answers_as_over_a_synchronous_reader(world: World) -> None:
    ts = TypeSystem(world.model)
    store = MemoryTupleReader(world.tuples)
    calls: list[Callable[[TupleReader], Any]] = []
    for layer in LAYERS:
        for rel in RELATIONS:
            for user in USERS:
                calls.append(lambda r, t=layer, x=rel, u=user: list_objects(ts, r, t, x, u))
            for obj in (f"{layer}:{i}" for i in IDS):
                calls.append(lambda r, o=obj, x=rel: expand(ts, r, o, x))
                calls.append(lambda r, o=obj, x=rel: list_users(ts, r, o, x, UserFilter("user")))
                for user in USERS:
                    calls.append(lambda r, o=obj, x=rel, u=user: check(ts, r, o, x, u))
    for call in calls:
        result, asked = stepped(call, store)
        assert result == call(store)
        assert len(asked) == len(set(asked)), "a question was asked twice"


DSL = """
type user
type folder
  relations
    define viewer: [user]
type doc
  relations
    define parent: [folder]
    define viewer: [user] or viewer from parent
"""


def test_it_asks_only_what_the_answer_needs() -> None:
    ts, store = world(DSL, "doc:1#parent@folder:a", "folder:a#viewer@user:ann")
    allowed, asked = stepped(lambda r: check(ts, r, "doc:1", "viewer", "user:ann"), store)
    assert allowed is True
    assert Read("read", ("doc:1", "parent")) in asked
    assert all(read.args[0] in ("doc:1", "folder:a") for read in asked)


def test_errors_of_the_evaluation_come_out_of_step() -> None:
    ts, _ = world(DSL)
    evaluation = Evaluation(lambda r: check(ts, r, "doc:1", "nope", "user:ann"))
    with pytest.raises(FgaError):
        evaluation.step()
    with pytest.raises(RuntimeError, match="still needs reads"):
        _ = Evaluation(lambda r: check(ts, r, "doc:1", "viewer", "user:ann")).result


class AsyncStore:
    """A store with only coroutines, as an async database client would be."""

    def __init__(self, tuples: Sequence[TupleKey]) -> None:
        self._reader = MemoryTupleReader(tuples)
        self.round_trips = 0

    async def fetch(self, read: Read) -> Sequence[TupleKey]:
        self.round_trips += 1
        await asyncio.sleep(0)
        return read.answer_from(self._reader)


def test_asyncio_drives_a_check_against_an_async_store() -> None:
    ts, store = world(DSL, "doc:1#parent@folder:a", "folder:a#viewer@user:ann")
    remote = AsyncStore(
        list(store.read("doc:1", "parent")) + list(store.read("folder:a", "viewer"))
    )

    async def allowed(user: str) -> bool:
        evaluation = Evaluation(lambda r: check(ts, r, "doc:1", "viewer", user))
        while (read := evaluation.step()) is not None:
            evaluation.answer(read, await remote.fetch(read))
        return evaluation.result

    async def both() -> list[bool]:
        return list(await asyncio.gather(allowed("user:ann"), allowed("user:bob")))

    assert asyncio.run(both()) == [True, False]
    assert remote.round_trips > 0
