"""Concurrent tuple writes committed together (``storage.fga_writes``), on SQLite,
PostgreSQL and MariaDB: writes queued while another holds the writers' lock go in as one
transaction, each still all or nothing on its own (a conflict fails that write alone, its
deletes undone), revisions in order; a write cancelled while queued is never written."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
import trio
from trio.testing import wait_all_tasks_blocked

from bastion.core.fga.tuples import TupleKey
from bastion.storage import StorageConfig
from bastion.storage.fga import WRITE_LOCK, StoredModel, TupleConflict, TupleFilter
from bastion.storage.fga_stores import SqlFgaStores
from bastion.storage.fga_writes import queue_for
from bastion.storage.sql import Database, open_database
from tests.storage.helpers import config_for

DSL = "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n"


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def database_config(
    request: pytest.FixtureRequest, shared_database_urls: dict[str, str]
) -> StorageConfig:
    kind: str = request.param
    return config_for(kind, shared_database_urls[kind])


@pytest.fixture
async def db(database_config: StorageConfig) -> AsyncIterator[Database]:
    async with open_database(database_config) as database:
        yield database


def key(n: int, user: str = "user:u") -> TupleKey:
    return TupleKey(f"doc:{n}", "viewer", f"{user}{n}")


class LockHeld:
    """The writers' lock held by another transaction until :meth:`release`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.taken = trio.Event()
        self._release = threading.Event()

    async def hold(self) -> None:
        def wait(_conn: sa.Connection) -> None:
            trio.from_thread.run_sync(self.taken.set)
            self._release.wait(10)

        await self.db.run_locked(WRITE_LOCK, wait)

    def release(self) -> None:
        self._release.set()


async def test_writes_queued_meanwhile_commit_as_one_group(db: Database) -> None:
    stores = SqlFgaStores(db)
    store_id = uuid.uuid4().hex[:26].upper()
    await stores.create(store_id, "queue")
    store = stores.store(store_id)
    await store.write_model(StoredModel(store_id[:10] + "M", DSL))
    await store.write_tuples([key(0)])
    await store.write_tuples([key(1)])
    queue = queue_for(db, WRITE_LOCK)
    groups, writes = queue.groups, queue.writes
    answers: dict[str, object] = {}

    async def write(name: str, *args: list[TupleKey]) -> None:
        try:
            answers[name] = await store.write_tuples(*args)
        except TupleConflict as conflict:
            answers[name] = conflict.key

    held = LockHeld(db)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(held.hold)
        await held.taken.wait()
        # the first takes the lock's queue slot and waits; the others queue behind it
        # one at a time, so that they queue in this order
        for name, *args in (
            ("first", [key(10)]),
            ("second", [key(11), key(12)]),
            ("conflict", [key(13), key(0)]),
            # its delete runs, then its write conflicts: the delete is undone
            ("undone", [key(0)], [key(1)]),
            ("after", [key(14)], [key(1)]),
        ):
            nursery.start_soon(write, name, *args)
            await wait_all_tasks_blocked()
        held.release()
    assert queue.groups - groups == 2
    assert queue.writes - writes == 5
    assert answers["conflict"] == key(0)
    assert answers["undone"] == key(0)
    # revisions in queue order: the model 1, two writes, then first, second, after
    assert (answers["first"], answers["second"], answers["after"]) == (4, 6, 8)
    page = await store.read_tuples(TupleFilter(), 100, "")
    assert sorted(k.object for k in page.tuples) == sorted(
        ["doc:0", "doc:10", "doc:11", "doc:12", "doc:14"]
    )
    assert await store.revision() == 8


async def test_a_write_cancelled_while_queued_is_never_written(db: Database) -> None:
    stores = SqlFgaStores(db)
    store = stores.store(uuid.uuid4().hex[:26].upper())
    held = LockHeld(db)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(held.hold)
        await held.taken.wait()
        nursery.start_soon(store.write_tuples, [key(1)])  # the group's leader: waits
        await wait_all_tasks_blocked()
        with trio.move_on_after(0.2):
            await store.write_tuples([key(2)])
        held.release()
    page = await store.read_tuples(TupleFilter(), 10, "")
    assert list(page.tuples) == [key(1)]
