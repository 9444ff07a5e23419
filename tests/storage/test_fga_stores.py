"""Several authorization stores on every backend (memory, SQLite, PostgreSQL, MariaDB):
each isolated (tuples, models, revisions, changes, assertions), the default one always
there, and a deleted store gone with everything it held."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from bastion.core.fga.tuples import TupleKey
from bastion.storage.fga import StoredModel, TupleConflict, TupleFilter, WriteOptions
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, FgaStores, MemoryFgaStores, SqlFgaStores
from bastion.storage.sql import open_database
from tests.storage.helpers import config_for

BACKENDS = ["memory", "sqlite", "postgres", "mariadb"]
DSL = "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n"

Opener = Callable[[], AbstractAsyncContextManager[FgaStores]]


def store_id() -> str:
    """A fresh 26-character id (the databases are shared by the tests of this module)."""
    return uuid.uuid4().hex[:26].upper()


@pytest.fixture(params=BACKENDS)
def open_stores(request: pytest.FixtureRequest, shared_database_urls: dict[str, str]) -> Opener:
    kind: str = request.param
    if kind == "memory":
        stores = MemoryFgaStores()

        @asynccontextmanager
        async def memory() -> AsyncIterator[FgaStores]:
            yield stores

        return memory
    url = shared_database_urls[kind]

    @asynccontextmanager
    async def sql() -> AsyncIterator[FgaStores]:
        async with open_database(config_for(kind, url)) as db:
            yield SqlFgaStores(db)

    return sql


async def test_stores_are_isolated(open_stores: Opener) -> None:
    async with open_stores() as stores:
        assert (await stores.get(DEFAULT_FGA_STORE)) is not None
        a, b = store_id(), store_id()
        await stores.create(a, "a")
        await stores.create(b, "b")
        one, two = stores.store(a), stores.store(b)
        key = TupleKey("doc:1", "viewer", "user:anne")
        await one.write_model(StoredModel(a + "M", DSL))
        await one.write_tuples([key])
        # the same tuple in another store is no conflict; revisions count per store
        assert await two.write_tuples([key]) == 1
        assert await one.revision() == 2
        with pytest.raises(TupleConflict):
            await one.write_tuples([key])
        await one.write_tuples([key], [], WriteOptions(ignore_existing=True))
        # ignored only when the very same: another condition on the same key still fails
        conditioned = TupleKey("doc:1", "viewer", "user:anne", "c", {"x": 1})
        with pytest.raises(TupleConflict):
            await one.write_tuples([conditioned], [], WriteOptions(ignore_existing=True))
        await two.write_tuples(
            [], [TupleKey("doc:2", "viewer", "user:x")], WriteOptions(ignore_missing=True)
        )
        assert (await two.head()).model is None
        page = await one.read_tuples(TupleFilter(), 10, "")
        assert list(page.tuples) == [key]
        assert len(page.written_at) == 1
        models = await stores.models(a, 10, "")
        assert [m.id for m in models.items] == [a + "M"]
        assert (await stores.models(b, 10, "")).items == []
        changes = await stores.changes(a, "doc", 10, "")
        assert [(c.operation, c.key) for c in changes.items] == [("write", key)]
        again = await stores.changes(a, "doc", 10, changes.continuation_token)
        assert again.items == []
        await stores.write_assertions(a, a + "M", [{"expectation": True}])
        assert await stores.assertions(a, a + "M") == [{"expectation": True}]
        assert await stores.assertions(b, a + "M") == []

        await stores.delete(a)
        assert await stores.get(a) is None
        assert (await stores.store(b).read_tuples(TupleFilter(), 10, "")).tuples == [key]
        listed = await stores.list_stores(100, "")
        ids = [s.id for s in listed.items]
        assert b in ids
        assert a not in ids
        assert [s.id for s in (await stores.list_stores(100, "", name="b")).items] == [b]
