"""The authorization store's contract on every backend (memory, SQLite, PostgreSQL, MariaDB,
and PostgreSQL announcing its writes in Redis), and the per-process engine state that
follows it through the changelog."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest
import sqlalchemy as sa
import trio

from bastion.core.fga.on_demand import OBJECT_LIMIT, ObjectTuples, ReadKey, whole_object
from bastion.core.fga.tuples import TupleKey, TupleReader
from bastion.service.fga.engine import EngineCaches, EngineState
from bastion.storage.fga import (
    MAX_REPLAY,
    FgaStore,
    MemoryFgaStore,
    SqlFgaStore,
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
)
from bastion.storage.fga_generation import GatedFgaStore, Generations
from bastion.storage.memory import RedisMemoryStore
from bastion.storage.sql import open_database
from bastion.storage.sql.schema import DEFAULT_FGA_STORE, fga_changelog, fga_models, fga_tuples
from tests.dbfixtures import fresh_redis_url
from tests.storage.helpers import config_for

#: ``+redis``: each handle announces its writes in one Redis (``storage.fga_generation``).
BACKENDS = ["memory", "sqlite", "postgres", "mariadb", "postgres+redis"]
MODEL = StoredModel(
    "01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n",
)

Opener = Callable[[], AbstractAsyncContextManager[FgaStore]]


def _clear(conn: sa.Connection) -> None:
    for table in (fga_tuples, fga_models, fga_changelog):
        conn.execute(sa.delete(table))


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, shared_database_urls: dict[str, str]) -> Opener:
    """Opens a handle on ONE store; several handles are several server processes."""
    kind: str = request.param
    if kind == "memory":
        store = MemoryFgaStore()

        @asynccontextmanager
        async def memory() -> AsyncIterator[FgaStore]:
            yield store

        return memory
    kind, _, gate = kind.partition("+")
    url = shared_database_urls[kind]
    redis_url = fresh_redis_url() if gate else ""
    cleared = False

    @asynccontextmanager
    async def sql() -> AsyncIterator[FgaStore]:
        nonlocal cleared
        async with open_database(config_for(kind, url)) as db:
            if not cleared:
                await db.run(_clear, write=True)
                cleared = True
            if not gate:
                yield SqlFgaStore(db)
                return
            redis = RedisMemoryStore(redis_url, pool_size=2, timeout=5)
            try:
                generations = Generations(redis.client)
                yield GatedFgaStore(SqlFgaStore(db), generations, DEFAULT_FGA_STORE)
            finally:
                await redis.aclose()

    return sql


def key(user: str, relation: str = "viewer", obj: str = "doc:1") -> TupleKey:
    return TupleKey(obj, relation, user)


async def test_an_empty_store(open_store: Opener) -> None:
    async with open_store() as store:
        assert await store.revision() == 0
        assert await store.changes_since(0) == []
        head = await store.head()
        assert (head.revision, head.model) == (0, None)
        page = await store.read_tuples(TupleFilter(), 100, "")
        assert list(page.tuples) == []
        assert page.continuation_token == ""


async def test_every_change_takes_the_next_revision(open_store: Opener) -> None:
    async with open_store() as store:
        assert await store.write_model(MODEL) == 1
        assert await store.write_tuples([key("user:a"), key("user:b")]) == 3
        assert await store.write_tuples([key("user:c")], [key("user:a")]) == 5
        changes = await store.changes_since(1)
        assert changes is not None
        assert [(c.revision, c.operation, c.key) for c in changes] == [
            (2, "write", key("user:a")),
            (3, "write", key("user:b")),
            (4, "delete", key("user:a")),
            (5, "write", key("user:c")),
        ]
        first = await store.changes_since(0)
        assert first is not None
        assert first[0].model == MODEL
        head = await store.head()
        assert (head.revision, head.model) == (5, MODEL)
        page = await store.read_tuples(TupleFilter(), 100, "")
        assert sorted(k.user for k in page.tuples) == ["user:b", "user:c"]
        fetched = await store.fetch(
            [("read", "doc:1", "viewer"), ("read_by_user", "user:a", "doc")]
        )
        assert fetched.revision == 5
        assert [[k.user for k in answer] for answer in fetched.answers] == [
            ["user:b", "user:c"],
            [],
        ]


async def test_reverse_reads_of_several_types_answer_each_read(open_store: Opener) -> None:
    """One batch asks a user for several types (one probe in SQL): each read gets the
    tuples of its own type alone, in the order written, and a type nobody asked for is
    not mixed in."""
    async with open_store() as store:
        await store.write_tuples(
            [
                key("folder:1", "parent", "folder:2"),
                key("folder:1", "parent", "doc:1"),
                key("folder:1", "parent", "doc:2"),
                key("folder:1", "parent", "team:1"),
                key("folder:9", "parent", "doc:3"),
                key("user:a", "viewer", "doc:1"),
            ]
        )
        reads = [
            ("read_by_user", "folder:1", "folder"),
            ("read_by_user", "folder:1", "doc"),
            ("read_by_user", "folder:9", "doc"),
            ("read_by_user", "folder:9", "folder"),
            ("read_by_user", "user:a", "doc"),
        ]
        fetched = await store.fetch(reads)
        assert [[(k.object, k.relation) for k in answer] for answer in fetched.answers] == [
            [("folder:2", "parent")],
            [("doc:1", "parent"), ("doc:2", "parent")],
            [("doc:3", "parent")],
            [],
            [("doc:1", "viewer")],
        ]


async def test_objects_read_whole_up_to_their_limit(open_store: Opener) -> None:
    async with open_store() as store:
        await store.write_model(MODEL)
        big = [key(f"user:{n}", obj="doc:big") for n in range(6)]
        small = [key("user:a", obj="doc:small"), key("user:b", "owner", obj="doc:small")]
        await store.write_tuples([*big, *small])
        fetched = await store.fetch(
            [
                ("read_object", "doc:small", "3"),
                ("read_object", "doc:big", "3"),
                ("read_object", "doc:none", "3"),
                ("read", "doc:big", "viewer"),
            ]
        )
        whole, overflowing, empty, by_relation = fetched.answers
        assert list(whole) == small  # every tuple of the object, in the order written
        assert len(overflowing) == 4
        assert set(overflowing) <= set(big)
        assert empty == ()
        assert list(by_relation) == big


async def test_large_batches_and_ids_with_line_ends_or_empty_read_their_own_tuples(
    open_store: Opener,
) -> None:
    """PostgreSQL gets a large batch's ids as one text split by line ends, except when an
    id has one (or is empty): the store itself takes such ids (the API refuses them), and
    they are read exactly as any other."""
    async with open_store() as store:
        odd = key("user:a", obj="doc:x\ny")
        plain = [key("user:a", obj="doc:x"), key("user:b", obj="doc:y")]
        await store.write_tuples([odd, *plain])
        many = [f"doc:n{n}" for n in range(1000)]
        fetched = await store.fetch(
            [
                *(("read_by_user", user, "doc") for user in ["user:b", *many]),
                *(("read_object", obj, "3") for obj in ["doc:x\ny", "", *many]),
                ("read_by_user", "user:a\nuser:b", "doc"),
            ]
        )
        answers = [list(answer) for answer in fetched.answers]
        assert answers[0] == [plain[1]]
        assert answers[1001:1003] == [[odd], []]
        assert answers[-1] == []
        assert not any(answers[1:1001])
        assert not any(answers[1003:-1])


async def test_a_batch_is_all_or_nothing(open_store: Opener) -> None:
    async with open_store() as store:
        await store.write_tuples([key("user:a")])
        with pytest.raises(TupleConflict) as exists:
            await store.write_tuples([key("user:new"), key("user:a")])
        assert exists.value.exists
        assert exists.value.key == key("user:a")
        with pytest.raises(TupleConflict) as missing:
            await store.write_tuples([key("user:new")], [key("user:a"), key("user:gone")])
        assert not missing.value.exists
        assert await store.revision() == 1
        page = await store.read_tuples(TupleFilter(), 100, "")
        assert [k.user for k in page.tuples] == ["user:a"]


async def test_conditions_and_case_are_kept(open_store: Opener) -> None:
    async with open_store() as store:
        conditioned = TupleKey("doc:A", "viewer", "user:X", "in_hours", {"hour": 10, "z": [1]})
        await store.write_tuples([conditioned, key("user:x", obj="doc:a")])
        upper = await store.read_tuples(TupleFilter(object="doc:A"), 100, "")
        assert list(upper.tuples) == [conditioned]
        assert upper.tuples[0].context == {"hour": 10, "z": [1]}
        lower = await store.read_tuples(TupleFilter(user="user:x"), 100, "")
        assert [k.object for k in lower.tuples] == ["doc:a"]


async def test_read_filters_and_pages(open_store: Opener) -> None:
    async with open_store() as store:
        await store.write_tuples([key(f"user:{i}", obj=f"doc:{i % 3}") for i in range(250)])
        await store.write_tuples([key("user:1", "owner", "folder:1")])
        pages, token = [], ""
        while True:
            page = await store.read_tuples(TupleFilter(relation="viewer"), 100, token)
            pages.append(len(page.tuples))
            token = page.continuation_token
            if not token:
                break
        assert pages == [100, 100, 50]
        by_object = await store.read_tuples(TupleFilter(object="doc:0"), 100, "")
        assert len(by_object.tuples) == 84
        by_type = await store.read_tuples(TupleFilter(user="user:1", object="folder:"), 100, "")
        assert list(by_type.tuples) == [key("user:1", "owner", "folder:1")]
        with pytest.raises(ValueError, match="invalid continuation token"):
            await store.read_tuples(TupleFilter(), 100, "!!")


async def test_reset_needs_an_empty_store_and_clears_every_version(open_store: Opener) -> None:
    async with open_store() as store:
        await store.write_model(MODEL)
        await store.write_model(StoredModel("01J00000000000000000000000", MODEL.dsl))
        await store.write_tuples([key("user:a")])
        with pytest.raises(StoreNotEmpty):
            await store.reset()
        await store.write_tuples([], [key("user:a")])
        revision = await store.reset()
        assert revision == 5
        head = await store.head()
        assert (head.revision, head.model) == (5, None)
        # What came before the reset is gone: a follower must reload.
        assert await store.changes_since(2) is None
        after = await store.changes_since(4)
        assert after is not None
        assert [c.operation for c in after] == ["reset"]


async def viewers(engine: EngineState) -> list[str]:
    """``doc:1#viewer`` as the engine reads it (its cache, else the store)."""
    return await engine.evaluate(lambda reader: [k.user for k in reader.read("doc:1", "viewer")])


async def test_engine_state_follows_writes_from_another_handle(open_store: Opener) -> None:
    async with open_store() as writer, open_store() as reader_store:
        follower = EngineState(reader_store)
        await follower.fresh()
        assert follower.model is None
        await writer.write_model(MODEL)
        await writer.write_tuples([key("user:a"), key("user:b")])
        await follower.fresh()
        assert follower.model is not None
        assert follower.model.id == MODEL.id
        assert await viewers(follower) == ["user:a", "user:b"]
        fetches = follower.fetches
        assert await viewers(follower) == ["user:a", "user:b"]
        assert follower.fetches == fetches  # cached
        await writer.write_tuples([key("user:c")], [key("user:a")])
        await follower.fresh()
        # The cached answer was discarded by the replayed changes.
        assert await viewers(follower) == ["user:b", "user:c"]
        assert follower.restarts == 1
        assert follower.changes_replayed == 5  # the model, two writes, a delete and a write
        # A reset makes the follower drop everything and reload.
        await writer.write_tuples([], [key("user:b"), key("user:c")])
        await writer.reset()
        await follower.fresh()
        assert follower.model is None
        assert await viewers(follower) == []
        assert follower.revision == await writer.revision()


async def test_cached_answers_are_out_of_the_cyclic_collector(open_store: Opener) -> None:
    """An answer the engine caches (an object read whole: its tuples, its index by relation
    and user) is untracked by the cyclic collector, whose full passes would otherwise
    walk a whole warm cache; it answers as before."""
    async with open_store() as store:
        await store.write_model(MODEL)
        await store.write_tuples([key("user:a"), key("user:b"), key("user:c", "owner")])
        engine = EngineState(store)
        await engine.fresh()
        assert await viewers(engine) == ["user:a", "user:b"]
        answer = engine.caches.reads.peek(whole_object(engine.scope, "doc:1", OBJECT_LIMIT))
        assert isinstance(answer, ObjectTuples)
        relation = answer.by_relation["viewer"]
        parts = [answer, *answer, answer.by_relation, relation, *relation, answer.__dict__]
        assert [gc.is_tracked(part) for part in parts] == [False] * len(parts)
        gc.collect()
        assert await viewers(engine) == ["user:a", "user:b"]


async def test_rounds_run_in_a_worker_thread_answer_the_same(open_store: Opener) -> None:
    async with open_store() as store:
        await store.write_model(MODEL)
        await store.write_tuples([key("user:a"), key("user:b")])
        engine = EngineState(store)
        await engine.fresh()
        offloaded: list[int] = []

        async def offload(step: Callable[[], list[ReadKey]]) -> list[ReadKey]:
            offloaded.append(1)
            return await trio.to_thread.run_sync(step)

        def run(reader: TupleReader) -> list[str]:
            return [k.user for k in reader.read("doc:1", "viewer")]

        assert await engine.evaluate(run, offload) == ["user:a", "user:b"]  # fetched
        assert await engine.evaluate(run, offload) == ["user:a", "user:b"]  # cached
        assert len(offloaded) == 3  # two rounds, then one
        assert await viewers(engine) == ["user:a", "user:b"]


async def test_engine_state_far_behind_starts_its_cache_over(open_store: Opener) -> None:
    async with open_store() as writer, open_store() as reader_store:
        follower = EngineState(reader_store)
        await follower.fresh()
        assert await viewers(follower) == []  # cached: empty
        batch = [key(f"user:{i}") for i in range(MAX_REPLAY + 1)]
        await writer.write_tuples(batch)
        await follower.fresh()
        assert follower.restarts == 2
        assert follower.changes_replayed == 0
        assert len(await viewers(follower)) == MAX_REPLAY + 1


async def test_a_store_that_fits_is_preloaded_and_answers_without_a_fetch(
    open_store: Opener,
) -> None:
    async with open_store() as writer, open_store() as reader_store:
        await writer.write_model(MODEL)
        many = [key(f"user:{n}", obj="doc:2") for n in range(OBJECT_LIMIT + 5)]
        await writer.write_tuples([key("user:a"), key("user:b"), *many])
        engine = EngineState(reader_store)
        await engine.fresh()
        assert await engine.preload() == 2  # doc:1 and doc:2 (past the limit: kept as such)
        assert await viewers(engine) == ["user:a", "user:b"]
        assert engine.fetches == 0
        # doc:2 has more tuples than an object read whole holds: read by relation.
        users = await engine.evaluate(lambda r: [k.user for k in r.read("doc:2", "viewer")])
        assert len(users) == OBJECT_LIMIT + 5
        assert engine.fetches == 1
        # Exact afterwards like any cached read: a write through another handle.
        await writer.write_tuples([key("user:c")])
        await engine.fresh()
        assert await viewers(engine) == ["user:a", "user:b", "user:c"]


async def test_a_store_too_large_for_half_the_cache_stays_on_demand(open_store: Opener) -> None:
    async with open_store() as writer, open_store() as reader_store:
        await writer.write_model(MODEL)
        await writer.write_tuples([key(f"user:{n}") for n in range(20)])
        engine = EngineState(reader_store, EngineCaches.sized(0))
        await engine.fresh()
        assert await engine.preload() == 0
        assert len(engine.caches.reads) == 0
