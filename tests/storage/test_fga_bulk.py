"""Tuples in bulk (``storage.fga_bulk``) on SQLite, PostgreSQL (COPY) and MariaDB: an import
is one transaction that skips what is stored already, names conflicts by line, writes
nothing when anything is wrong, leaves a changelog row per tuple and announces itself in
Redis; an export gives the store back as of one moment."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
import sqlalchemy as sa
import trio

from bastion.core.fga.tuples import TupleKey
from bastion.storage import StorageConfig
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import StoredModel, TupleFilter
from bastion.storage.fga_bulk import (
    ANALYZE_AFTER,
    Batch,
    ImportConflict,
    ModelChanged,
    export_tuples,
    import_tuples,
)
from bastion.storage.fga_generation import Generations
from bastion.storage.fga_partitions import own_partition, partition_of
from bastion.storage.fga_stores import SqlFgaStores
from bastion.storage.memory import RedisMemoryStore
from bastion.storage.sql import open_database
from tests.dbfixtures import fresh_redis_url
from tests.storage.helpers import config_for

DSL = "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n"
CONDITIONED = TupleKey("doc:c", "viewer", "user:cond", "in_office", {"ip": "10.0.0.1"})


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database(request: pytest.FixtureRequest, shared_database_urls: dict[str, str]) -> StorageConfig:
    """A migrated database (made outside trio: a sync fixture)."""
    kind: str = request.param
    return config_for(kind, shared_database_urls[kind])


@pytest.fixture
def postgres_url(shared_database_urls: dict[str, str]) -> str:
    return shared_database_urls["postgres"]


@pytest.fixture
async def stores(database: StorageConfig) -> AsyncIterator[SqlFgaStores]:
    async with open_database(database) as db:
        yield SqlFgaStores(db)


async def new_store(stores: SqlFgaStores) -> tuple[str, str]:
    """A fresh store (the databases are shared) with a model: its id and the model's."""
    store_id = uuid.uuid4().hex[:26].upper()
    await stores.create(store_id, "bulk")
    model_id = store_id[:10] + "MODEL"
    await stores.store(store_id).write_model(StoredModel(model_id, DSL))
    return store_id, model_id


def viewers(count: int, start: int = 0) -> list[TupleKey]:
    return [TupleKey(f"doc:{n}", "viewer", f"user:u{n}") for n in range(start, start + count)]


def batches(keys: Sequence[TupleKey], size: int = 40, first_line: int = 2) -> list[Batch]:
    numbered = [(first_line + i, key) for i, key in enumerate(keys)]
    return [numbered[i : i + size] for i in range(0, len(numbered), size)]


async def stored(stores: SqlFgaStores, store_id: str) -> list[TupleKey]:
    found: list[TupleKey] = []
    await export_tuples(stores, store_id, found.append)
    return found


async def test_an_import_writes_once_and_again_changes_nothing(stores: SqlFgaStores) -> None:
    store_id, model_id = await new_store(stores)
    keys = [*viewers(100), CONDITIONED]
    # a repeat within the stream, as given: skipped
    given = [*keys, keys[3]]
    seen: list[int] = []
    report = await import_tuples(stores, store_id, batches(given), model_id, progress=seen.append)
    assert (report.given, report.written, report.skipped) == (102, 101, 1)
    assert report.revision == 1 + 101  # the model's revision, then one per tuple
    assert seen == [40, 80, 102]
    assert await stored(stores, store_id) == keys
    assert [k.context for k in await stored(stores, store_id) if k.condition] == [
        {"ip": "10.0.0.1"}
    ]
    # the changelog has every tuple as a write, as OpenFGA's /changes shows them
    changes = await stores.changes(store_id, "", 100, "")
    assert [c.key for c in changes.items][:3] == keys[:3]
    assert {c.operation for c in changes.items} == {"write"}
    assert [c.revision for c in changes.items] == list(range(2, 102))
    view = stores.store(store_id)
    assert await view.revision() == report.revision
    again = await import_tuples(stores, store_id, batches([*keys, *viewers(2, 100)]), model_id)
    assert (again.written, again.skipped, again.revision) == (2, 101, report.revision + 2)
    page = await view.read_tuples(TupleFilter(object="doc:101"), 10, "")
    assert list(page.tuples) == viewers(1, 101)


async def test_new_tuples_keep_the_streams_order(stores: SqlFgaStores) -> None:
    """Every tuple new (PostgreSQL's insert without ON CONFLICT, in key order): the store
    and the changelog still list them in the stream's order, one revision each."""
    store_id, model_id = await new_store(stores)
    keys = [*viewers(60), CONDITIONED, *reversed(viewers(60, 60))]
    report = await import_tuples(stores, store_id, batches(keys), model_id)
    assert (report.written, report.revision) == (121, 1 + 121)
    assert await stored(stores, store_id) == keys
    changes = await stores.changes(store_id, "", 100, "")
    assert [c.key for c in changes.items] == keys[:100]
    assert [c.revision for c in changes.items] == list(range(2, 102))


async def test_copys_special_characters_are_stored_as_given(stores: SqlFgaStores) -> None:
    store_id, model_id = await new_store(stores)
    odd = [
        TupleKey("doc:back\\slash", "viewer", "user:\\N"),
        TupleKey("doc:tab\there", "viewer", "user:line\nend\r"),
        TupleKey("doc:ctx", "viewer", "user:u", "in_office", {"ip": "a\\b\t"}),
        TupleKey("doc:plain", "viewer", "user:p"),
    ]
    await import_tuples(stores, store_id, batches(odd), model_id)
    found = await stored(stores, store_id)
    assert found == odd
    assert found[2].context == {"ip": "a\\b\t"}
    # the same keys again: found stored, by the hash the API's writes use
    again = await import_tuples(stores, store_id, batches(odd), model_id)
    assert again.written == 0


async def test_conflicts_are_named_by_line_and_nothing_is_written(stores: SqlFgaStores) -> None:
    store_id, model_id = await new_store(stores)
    await stores.store(store_id).write_tuples([CONDITIONED])
    before = await stores.store(store_id).revision()
    other = TupleKey(CONDITIONED.object, "viewer", CONDITIONED.user, "in_office", {"ip": "x"})
    plain = TupleKey("doc:9", "viewer", "user:nine")
    repeated = TupleKey("doc:9", "viewer", "user:nine", "in_office", {"ip": "10.0.0.9"})
    stream = [*viewers(50), other, plain, *viewers(20, 50), repeated]
    with pytest.raises(ImportConflict) as refused:
        await import_tuples(stores, store_id, batches(stream, size=30), model_id)
    assert refused.value.conflicts == [(52, other), (74, repeated)]
    assert await stored(stores, store_id) == [CONDITIONED]
    assert await stores.store(store_id).revision() == before


async def test_a_model_written_meanwhile_refuses_the_import(stores: SqlFgaStores) -> None:
    store_id, model_id = await new_store(stores)
    await stores.store(store_id).write_model(StoredModel(model_id + "2", DSL))
    with pytest.raises(ModelChanged):
        await import_tuples(stores, store_id, batches(viewers(10)), model_id)
    assert await stored(stores, store_id) == []


async def test_a_stream_that_fails_midway_writes_nothing(stores: SqlFgaStores) -> None:
    store_id, model_id = await new_store(stores)

    def failing() -> Iterator[Batch]:
        yield from batches(viewers(80))
        raise ValueError("line 83: broken")

    with pytest.raises(ValueError, match="broken"):
        await import_tuples(stores, store_id, failing(), model_id)
    assert await stored(stores, store_id) == []
    assert (await stores.changes(store_id, "", 10, "")).items == []


async def test_an_import_is_announced_as_a_write(postgres_url: str) -> None:
    """With Redis, the store's generation changes once the import has committed: every
    process reads SQL again before its next answer."""
    redis = RedisMemoryStore(fresh_redis_url(), pool_size=2, timeout=2)
    try:
        async with open_database(config_for("postgres", postgres_url)) as db:
            generations = Generations(redis.client)
            stores = SqlFgaStores(db, generations=generations)
            store_id, model_id = await new_store(stores)
            before = await generations.read(store_id)
            assert before is not None
            await import_tuples(stores, store_id, batches(viewers(10)), model_id)
            after = await generations.read(store_id)
            assert after is not None
            assert after != before
    finally:
        await redis.aclose()


async def test_a_connection_lost_midway_imports_nothing(postgres_url: str) -> None:
    """The server ends the import's connection during its COPY: an error that says so,
    and nothing written (never the rest of the stream in a second transaction)."""
    async with open_database(config_for("postgres", postgres_url)) as db:
        stores = SqlFgaStores(db)
        store_id, model_id = await new_store(stores)
        admin = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))

        def cut() -> Iterator[Batch]:
            yield from batches(viewers(40))
            with admin.connect() as conn:
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE query LIKE 'COPY bastion_fga_import%'"
                    )
                )
            yield from batches(viewers(40, 40))

        try:
            with pytest.raises(StorageUnavailable) as lost:
                await import_tuples(stores, store_id, cut(), model_id)
        finally:
            admin.dispose()
        assert "lost" in str(lost.value)
        assert await stored(stores, store_id) == []


async def test_a_large_import_leaves_the_planner_statistics(postgres_url: str) -> None:
    """The engine's reads by object plan on them: without, until autovacuum's next pass,
    a read of one object may walk the whole store's index."""
    async with open_database(config_for("postgres", postgres_url)) as db:
        stores = SqlFgaStores(db)
        store_id, model_id = await new_store(stores)

        def estimate(conn: sa.Connection) -> tuple[float, int]:
            """The planner's row count for the store's partition (ANALYZE's, exact at
            this size) beside the real one."""
            name = partition_of(conn, store_id)
            return conn.execute(
                sa.text(
                    f'SELECT reltuples, (SELECT count(*) FROM "{name}") FROM pg_class '
                    "WHERE relname = :name"
                ),
                {"name": name},
            ).one()

        await import_tuples(stores, store_id, batches(viewers(ANALYZE_AFTER), 5000), model_id)
        planned, real = await db.run(estimate)
        assert planned == real
        await import_tuples(stores, store_id, batches(viewers(10, ANALYZE_AFTER)), model_id)
        planned, real = await db.run(estimate)
        assert planned == real - 10  # a small one leaves it to autovacuum


def own_partition_of(db_url: str, store_id: str) -> str | None:
    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return own_partition(conn, store_id)
    finally:
        engine.dispose()


async def test_an_empty_store_is_loaded_into_its_own_partition(postgres_url: str) -> None:
    """PostgreSQL: the first import attaches the store's own partition; later writes and
    imports go into it; emptied and imported again, it is replaced; a deleted store's
    partition is dropped."""
    async with open_database(config_for("postgres", postgres_url)) as db:
        stores = SqlFgaStores(db)
        store_id, model_id = await new_store(stores)
        report = await import_tuples(stores, store_id, batches(viewers(50)), model_id)
        assert (report.written, report.revision) == (50, 51)
        first = own_partition_of(postgres_url, store_id)
        assert first is not None
        view = stores.store(store_id)
        await view.write_tuples([CONDITIONED])
        again = await import_tuples(stores, store_id, batches(viewers(5, 50)), model_id)
        assert (again.written, again.revision) == (5, 57)
        assert own_partition_of(postgres_url, store_id) == first
        assert await stored(stores, store_id) == [*viewers(50), CONDITIONED, *viewers(5, 50)]
        changes = await stores.changes(store_id, "", 100, "")
        assert [c.revision for c in changes.items] == list(range(2, 58))

        await view.write_tuples((), await stored(stores, store_id))
        await import_tuples(stores, store_id, batches(viewers(3, 100)), model_id)
        second = own_partition_of(postgres_url, store_id)
        assert second not in (None, first)
        assert await stored(stores, store_id) == viewers(3, 100)
        await stores.delete(store_id)
        assert own_partition_of(postgres_url, store_id) is None


async def test_a_store_written_during_the_load_takes_the_insert(postgres_url: str) -> None:
    """An API write lands while the stream is sent into an empty store: the store is not
    empty when the import takes the lock, so its tuples are inserted beside that write."""
    async with open_database(config_for("postgres", postgres_url)) as db:
        stores = SqlFgaStores(db)
        store_id, model_id = await new_store(stores)
        meanwhile = TupleKey("doc:meanwhile", "viewer", "user:m")
        token = trio.lowlevel.current_trio_token()
        async with open_database(config_for("postgres", postgres_url)) as other:
            writer = SqlFgaStores(other).store(store_id)

            def stream() -> Iterator[Batch]:
                yield from batches(viewers(40))
                written = [meanwhile, viewers(1)[0]]
                trio.from_thread.run(writer.write_tuples, written, trio_token=token)
                yield from batches(viewers(40, 40), first_line=42)

            report = await import_tuples(stores, store_id, stream(), model_id)
        assert (report.given, report.written) == (80, 79)
        assert own_partition_of(postgres_url, store_id) is None
        found = await stored(stores, store_id)
        assert sorted(found, key=str) == sorted([meanwhile, *viewers(80)], key=str)
