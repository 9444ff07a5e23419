"""The store's generation in Redis (``storage.fga_generation``): each "process" here is its
own database connection pool, Redis client and :class:`EngineState` on one PostgreSQL
store and one Redis. A write through one is used by the next refresh of another, which
reads SQL only when the generation says something may have changed, and reads SQL
whenever Redis cannot say."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio

from bastion.core.fga.tuples import TupleKey
from bastion.service.fga.engine import EngineState
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import (
    Change,
    Fetched,
    FgaStore,
    Head,
    Read,
    SqlFgaStore,
    StoredModel,
    TupleConflict,
    TupleFilter,
    TuplePage,
    WriteOptions,
)
from bastion.storage.fga_generation import GatedFgaStore, Generations
from bastion.storage.fga_replica import ReplicaReads, ReplicatedFgaStore
from bastion.storage.fga_stores import SqlFgaStores
from bastion.storage.memory import RedisMemoryStore
from bastion.storage.sql import Database, open_database
from bastion.storage.sql.schema import DEFAULT_FGA_STORE, fga_changelog, fga_models, fga_tuples
from tests.dbfixtures import fresh_redis_url
from tests.redis_topologies import RedisProcess, start_redis
from tests.storage.helpers import config_for

MODEL = StoredModel(
    "01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n",
)
#: The store revision's SQL reads, the ones the generation spares.
FOLLOW_READS = ("revision", "changes_since", "head")
NO_OPTIONS = WriteOptions()


def key(user: str) -> TupleKey:
    return TupleKey("doc:1", "viewer", user)


class CountingStore:
    """A real SQL store that counts the engine's reads of it."""

    def __init__(self, inner: FgaStore) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.calls: Counter[str] = Counter()

    def follow_reads(self) -> int:
        return sum(self.calls[name] for name in FOLLOW_READS)

    async def revision(self) -> int:
        self.calls["revision"] += 1
        return await self.inner.revision()

    async def changes_since(self, revision: int) -> list[Change] | None:
        self.calls["changes_since"] += 1
        return await self.inner.changes_since(revision)

    async def head(self) -> Head:
        self.calls["head"] += 1
        return await self.inner.head()

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        return await self.inner.fetch(reads)

    async def write_model(self, model: StoredModel) -> int:
        return await self.inner.write_model(model)

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = NO_OPTIONS,
    ) -> int:
        return await self.inner.write_tuples(writes, deletes, options)

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        return await self.inner.read_tuples(where, page_size, token)

    async def reset(self) -> int:
        return await self.inner.reset()


@dataclass
class Process:
    db: Database
    redis: RedisMemoryStore
    sql: CountingStore
    generations: Generations
    store: GatedFgaStore
    engine: EngineState

    async def users(self) -> list[str]:
        return await self.engine.evaluate(
            lambda reader: [k.user for k in reader.read("doc:1", "viewer")]
        )


def _clear(conn: sa.Connection) -> None:
    for table in (fga_tuples, fga_models, fga_changelog):
        conn.execute(sa.delete(table).where(table.c.store_id == DEFAULT_FGA_STORE))


@pytest.fixture
def postgres_url(shared_database_urls: dict[str, str]) -> str:
    url = shared_database_urls["postgres"]
    trio.run(_cleared, url)
    return url


async def _cleared(url: str) -> None:
    async with open_database(config_for("postgres", url)) as db:
        await db.run(_clear, write=True)


@asynccontextmanager
async def process(
    postgres_url: str, redis_url: str, *, lease: float = 600.0
) -> AsyncIterator[Process]:
    async with AsyncExitStack() as stack:
        db = await stack.enter_async_context(open_database(config_for("postgres", postgres_url)))
        redis = RedisMemoryStore(redis_url, pool_size=2, timeout=2)
        stack.push_async_callback(redis.aclose)
        sql = CountingStore(SqlFgaStore(db))
        generations = Generations(redis.client, lease=lease)
        store = GatedFgaStore(sql, generations, DEFAULT_FGA_STORE)
        yield Process(db, redis, sql, generations, store, EngineState(store))


@pytest.fixture
def redis_url() -> str:
    return fresh_redis_url()


@pytest.fixture(params=["redis", "redis-sentinel", "redis-cluster"])
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """One server (the trio client), a Sentinel's master (the same), a Cluster (redis-py
    in threads)."""
    if request.param == "redis":
        return fresh_redis_url()
    topologies: dict[str, str] = request.getfixturevalue("redis_topologies")
    return topologies[request.param]


async def test_a_write_through_one_process_is_used_by_the_next_refresh_of_another(
    postgres_url: str, any_redis_url: str
) -> None:
    redis_url = any_redis_url
    async with process(postgres_url, redis_url) as a, process(postgres_url, redis_url) as b:
        await b.engine.fresh()
        assert b.engine.model is None
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        assert b.engine.model is not None
        await a.store.write_tuples([key("user:x")])
        await b.engine.fresh()
        assert await b.users() == ["user:x"]
        await a.store.write_tuples([key("user:y")], [key("user:x")])
        await b.engine.fresh()
        assert await b.users() == ["user:y"]
        # ... and the other way round, a reset included.
        await b.store.write_tuples([], [key("user:y")])
        await b.store.reset()
        await a.engine.fresh()
        assert a.engine.model is None
        assert await a.users() == []


async def test_nothing_changed_means_no_sql_read(postgres_url: str, any_redis_url: str) -> None:
    redis_url = any_redis_url
    async with process(postgres_url, redis_url) as a, process(postgres_url, redis_url) as b:
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        before = b.sql.follow_reads()
        for _ in range(5):
            await b.engine.fresh()
        assert b.sql.follow_reads() == before
        await a.store.write_tuples([key("user:x")])
        await b.engine.fresh()
        assert await b.users() == ["user:x"]
        assert b.sql.follow_reads() > before
        before = b.sql.follow_reads()
        await b.engine.fresh()
        assert b.sql.follow_reads() == before
        # A refused write (rolled back) leaves no write in progress behind.
        with pytest.raises(TupleConflict):
            await a.store.write_tuples([key("user:x")])
        await b.engine.fresh()
        before = b.sql.follow_reads()
        await b.engine.fresh()
        assert b.sql.follow_reads() == before
        # HIGHER_CONSISTENCY reads SQL whatever the generation says.
        await b.engine.fresh(consistent=True)
        assert b.sql.follow_reads() == before + 1


async def test_a_generation_read_ahead_answers_at_once_and_misses_no_write(
    postgres_url: str, any_redis_url: str
) -> None:
    """``fresh(ahead=...)`` with the read made beside another request (the caller's
    authentication): no SQL read while nothing changed, every write made before it seen."""
    async with process(postgres_url, any_redis_url) as a, process(postgres_url, any_redis_url) as b:

        async def request() -> None:
            with b.engine.generation_ahead() as ahead:
                assert ahead is not None
                await b.redis.get("the caller's own read")
                await b.engine.fresh(ahead=ahead)

        await a.store.write_model(MODEL)
        await b.engine.fresh()
        before = b.sql.follow_reads()
        for _ in range(3):
            await request()
        assert b.sql.follow_reads() == before
        await a.store.write_tuples([key("user:x")])
        await request()
        assert await b.users() == ["user:x"]
        await a.store.write_tuples([key("user:y")], [key("user:x")])
        await request()
        assert await b.users() == ["user:y"]
        # A write in progress: not skipped over.
        write_id = await a.generations.begin(DEFAULT_FGA_STORE)
        await request()
        assert b.sql.follow_reads() > before
        await a.generations.end(DEFAULT_FGA_STORE, write_id)


async def test_no_read_ahead_before_a_first_refresh(postgres_url: str, redis_url: str) -> None:
    async with process(postgres_url, redis_url) as b:
        with b.engine.generation_ahead() as ahead:
            assert ahead is None
        await b.engine.fresh()
        with b.engine.generation_ahead() as ahead:
            assert ahead is not None


async def test_concurrent_requests_share_one_generation_read(
    postgres_url: str, redis_url: str
) -> None:
    async with process(postgres_url, redis_url) as a, process(postgres_url, redis_url) as b:
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        reads = dict(b.generations.reads)
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(b.engine.fresh)
        # One refresh under way, one more for those who came during it: never 20.
        assert sum(b.generations.reads.values()) - sum(reads.values()) <= 2


async def test_a_write_in_progress_keeps_readers_on_sql_until_it_ends(
    postgres_url: str, redis_url: str
) -> None:
    async with process(postgres_url, redis_url) as a, process(postgres_url, redis_url) as b:
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        # A write announced as begun, committed, and not (yet) announced as over.
        write_id = await a.generations.begin(DEFAULT_FGA_STORE)
        await a.sql.write_tuples([key("user:x")])
        for _ in range(2):
            before = b.sql.follow_reads()
            await b.engine.fresh()
            assert await b.users() == ["user:x"]
            assert b.sql.follow_reads() > before
        await a.generations.end(DEFAULT_FGA_STORE, write_id)
        await b.engine.fresh()
        before = b.sql.follow_reads()
        await b.engine.fresh()
        assert b.sql.follow_reads() == before


async def test_a_write_never_announced_as_over_is_covered_when_its_lease_ends(
    postgres_url: str, redis_url: str
) -> None:
    async with (
        process(postgres_url, redis_url, lease=0.05) as a,
        process(postgres_url, redis_url) as b,
    ):
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        await a.generations.begin(DEFAULT_FGA_STORE)  # the writer died before its commit
        await trio.sleep(0.1)
        # Nobody saw the write in progress: the lease's end alone must make B read SQL.
        await a.sql.write_tuples([key("user:x")])  # a commit that came late
        await b.engine.fresh()
        assert await b.users() == ["user:x"]


async def test_a_lost_generation_is_never_taken_for_an_old_one(
    postgres_url: str, redis_url: str
) -> None:
    async with process(postgres_url, redis_url) as a, process(postgres_url, redis_url) as b:
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        client = RedisMemoryStore(redis_url, pool_size=1, timeout=2).client
        try:
            await client.execute("FLUSHDB")  # Redis restarted empty
        finally:
            await client.aclose()
        await a.sql.write_tuples([key("user:x")])  # a write made while it was away
        await b.engine.fresh()
        assert await b.users() == ["user:x"]
        before = b.sql.follow_reads()
        await b.engine.fresh()
        assert b.sql.follow_reads() == before


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    node = start_redis(tmp_path / "redis")
    try:
        yield node
    finally:
        node.stop()


async def test_redis_unreachable_means_sql_reads_and_refused_writes(
    postgres_url: str, own_redis: RedisProcess
) -> None:
    url = f"redis://127.0.0.1:{own_redis.port}/0"
    async with process(postgres_url, url) as a, process(postgres_url, url) as b:
        await a.store.write_model(MODEL)
        await b.engine.fresh()
        own_redis.kill()
        # A write through bastion is refused before anything is written ...
        with pytest.raises(StorageUnavailable):
            await a.store.write_tuples([key("user:x")])
        assert await a.sql.revision() == 1
        # ... and a reader falls back to SQL, exact: it sees a write made without Redis.
        await a.sql.write_tuples([key("user:y")])
        before = b.sql.follow_reads()
        await b.engine.fresh()
        assert await b.users() == ["user:y"]
        assert b.sql.follow_reads() > before
        assert b.generations.reads["unavailable"] > 0


async def test_every_store_view_announces_its_writes(postgres_url: str, redis_url: str) -> None:
    """The registry's views (the default store and OpenFGA's), and the primary's side of
    a replicated view; the engine reads a replicated view's revision every time."""
    async with (
        open_database(config_for("postgres", postgres_url)) as db,
        process(postgres_url, redis_url) as b,
    ):
        redis = RedisMemoryStore(redis_url, pool_size=2, timeout=2)
        try:
            generations = Generations(redis.client)
            view = SqlFgaStores(db, generations=generations).store(DEFAULT_FGA_STORE)
            assert isinstance(view, GatedFgaStore)
            await view.write_model(MODEL)
            await b.engine.fresh()
            assert b.engine.model is not None
            replicated = SqlFgaStores(db, replica=ReplicaReads(db), generations=generations).store(
                DEFAULT_FGA_STORE
            )
            assert isinstance(replicated, ReplicatedFgaStore)
            await replicated.write_tuples([key("user:x")])
            await b.engine.fresh()
            assert await b.users() == ["user:x"]
            follower = EngineState(replicated)
            await follower.fresh()
            reads = dict(replicated.reads.reads)
            await follower.fresh()
            assert sum(replicated.reads.reads.values()) == sum(reads.values()) + 1
        finally:
            await redis.aclose()
