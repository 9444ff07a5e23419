"""Unreachable stores fail fast with StorageUnavailable; trio cancellation reaches PostgreSQL."""

from __future__ import annotations

import socket
import uuid

import asyncpg
import psycopg
import pytest
import sqlalchemy as sa
import trio
import trio_asyncio

from bastion.storage import StorageConfig, StorageUnavailable, open_storage
from bastion.storage.sql import open_database
from tests.storage.helpers import asyncpg_url, config_for, eventually


def unused_port() -> int:
    """A local port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("kind", "scheme"),
    [("postgres", "postgresql"), ("postgres", "postgresql+asyncpg"), ("mariadb", "mysql")],
)
async def test_unreachable_database(kind: str, scheme: str) -> None:
    url = f"{scheme}://user@127.0.0.1:{unused_port()}/bastion"
    config = config_for(kind, url, run_migrations=False, timeout=5)
    async with open_storage(config) as storage:
        with pytest.raises(StorageUnavailable):
            await storage.ping()
        with pytest.raises(StorageUnavailable):
            await storage.db.run(lambda conn: conn.exec_driver_sql("SELECT 1").scalar())
    with pytest.raises(StorageUnavailable):
        async with open_storage(config_for(kind, url, timeout=5)):
            pass


async def test_unreachable_redis(tmp_path: object) -> None:
    config = StorageConfig(
        database_type="sqlite",
        database_url=f"{tmp_path}/bastion.db",
        memory_store_url=f"redis://127.0.0.1:{unused_port()}/0",
        timeout=5,
    )
    async with open_storage(config) as storage:
        await storage.db.ping()
        with pytest.raises(StorageUnavailable):
            await storage.ping()
        with pytest.raises(StorageUnavailable):
            await storage.memory.get("anything")


async def test_reachable_storage_pings(database_config: StorageConfig) -> None:
    async with open_storage(database_config) as storage:
        await storage.ping()


@pytest.fixture(params=["psycopg", "asyncpg"])
def postgres_config(
    request: pytest.FixtureRequest, shared_database_urls: dict[str, str]
) -> StorageConfig:
    url = shared_database_urls["postgres"]
    return config_for("postgres", asyncpg_url(url) if request.param == "asyncpg" else url)


async def test_cancel_scope_cancels_a_postgres_query(postgres_config: StorageConfig) -> None:
    """A query stuck on a row lock, cancelled by trio, is gone from the server (both drivers)."""
    marker = f"cancel_probe_{uuid.uuid4().hex}"
    url = "postgresql://" + postgres_config.database_url.split("://", 1)[1]
    async with trio_asyncio.open_loop(), open_database(postgres_config) as db:
        holder = await trio_asyncio.aio_as_trio(asyncpg.connect)(url)
        # Watches from outside any transaction: inside one, pg_stat_activity is a snapshot.
        observer = await trio_asyncio.aio_as_trio(asyncpg.connect)(url)
        try:
            await trio_asyncio.aio_as_trio(holder.execute)(
                "CREATE TABLE IF NOT EXISTS cancel_probe (id int primary key);"
                "INSERT INTO cancel_probe VALUES (1) ON CONFLICT DO NOTHING;"
            )
            await trio_asyncio.aio_as_trio(holder.execute)(
                "BEGIN; SELECT * FROM cancel_probe WHERE id = 1 FOR UPDATE;"
            )

            def blocked_update(conn: sa.Connection) -> None:
                conn.exec_driver_sql(f"UPDATE cancel_probe SET id = 1 WHERE id = 1 /* {marker} */")

            async def running() -> int:
                count: int = await trio_asyncio.aio_as_trio(observer.fetchval)(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND state = 'active'"
                    " AND pid <> pg_backend_pid()",
                    f"%{marker}%",
                )
                return count

            async def wait_until(want: int) -> bool:
                async def reached() -> bool:
                    return await running() == want

                return await eventually(reached)

            async with trio.open_nursery() as nursery:
                cancelled: list[bool] = []

                async def victim(scope: trio.CancelScope) -> None:
                    with scope:
                        await db.run(blocked_update, write=True)
                    cancelled.append(scope.cancelled_caught)

                scope = trio.CancelScope()
                nursery.start_soon(victim, scope)
                assert await wait_until(1), "the update never reached the server"
                scope.cancel()
            assert cancelled == [True]
            assert await wait_until(0), "the cancelled query is still running on the server"
            # The pool stays usable after the cancellation.
            assert await db.run(lambda conn: conn.exec_driver_sql("SELECT 2").scalar()) == 2
        finally:
            await trio_asyncio.aio_as_trio(holder.close)()
            await trio_asyncio.aio_as_trio(observer.close)()


@pytest.fixture
def postgres_url(shared_database_urls: dict[str, str]) -> str:
    return shared_database_urls["postgres"]


async def test_closing_waits_for_cancelled_calls_to_give_back_their_connections(
    postgres_url: str,
) -> None:
    """A cancelled caller's thread still holds its connection; closing the database lets it
    finish and closes that connection too, instead of leaving it to the garbage collector."""
    probe = f"close_probe_{uuid.uuid4().hex[:12]}"
    url = postgres_url
    async with open_database(config_for("postgres", f"{url}?application_name={probe}")) as db:
        with trio.move_on_after(0.3):
            await db.run(lambda conn: conn.exec_driver_sql("SELECT pg_sleep(1)").all())

    def still_connected() -> int:
        with psycopg.connect("postgresql://" + url.split("://", 1)[1]) as observer:
            row = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (probe,)
            ).fetchone()
        return int(row[0]) if row is not None else -1

    assert await trio.to_thread.run_sync(still_connected) == 0
