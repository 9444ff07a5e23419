"""Fresh, empty databases for tests, isolated per pytest-xdist worker.

Each helper drops and recreates its database (or flushes its Redis database) and returns a
URL usable as ``--database-url`` / ``--memory-store-url``. ``purpose`` tells apart several
databases that one worker needs at once. The fixtures at the bottom give a fresh one per
test; import them into a conftest (``from tests.dbfixtures import postgres_url``) to use.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pymysql
import pytest
import redis
from sqlalchemy.engine import make_url

from tests.services import MYSQL_BASE, PG_BASE, REDIS_BASE, db_name, redis_db

__all__ = [
    "DATABASE_TYPES",
    "fresh_database_url",
    "fresh_mariadb_url",
    "fresh_postgres_url",
    "fresh_redis_url",
    "fresh_sqlite_url",
    "mariadb_url",
    "postgres_url",
    "redis_url",
    "sqlite_url",
]

#: The ``--database-type`` for each kind a test can ask for.
DATABASE_TYPES = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mariadb"}


#: Databases this process made, dropped when the session ends (``drop_made_databases``).
_MADE: dict[str, set[str]] = {"postgres": set(), "mariadb": set()}


def fresh_postgres_url(purpose: str = "main") -> str:
    name = db_name(purpose)
    _MADE["postgres"].add(name)
    admin = make_url(PG_BASE).set(database="postgres").render_as_string(hide_password=False)

    async def recreate() -> None:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    _run_asyncio(recreate)
    return make_url(PG_BASE).set(database=name).render_as_string(hide_password=False)


def fresh_mariadb_url(purpose: str = "main") -> str:
    name = db_name(purpose)
    _MADE["mariadb"].add(name)
    base = make_url(MYSQL_BASE)
    conn = pymysql.connect(
        host=base.host or "127.0.0.1",
        port=base.port or 3306,
        user=base.username or "root",
        password=base.password or "",
    )
    try:
        with conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        conn.close()
    return base.set(database=name).render_as_string(hide_password=False)


def fresh_redis_url() -> str:
    url = f"{REDIS_BASE.rstrip('/')}/{redis_db()}"
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url


def fresh_sqlite_url(directory: Path, purpose: str = "main") -> str:
    """A path, as an operator would pass it; the file does not exist yet."""
    path = directory / f"{db_name(purpose)}.db"
    for leftover in directory.glob(path.name + "*"):
        leftover.unlink()
    return str(path)


def fresh_database_url(kind: str, directory: Path, purpose: str = "main") -> str:
    """``kind`` is a key of :data:`DATABASE_TYPES`."""
    if kind == "postgres":
        return fresh_postgres_url(purpose)
    if kind == "mariadb":
        return fresh_mariadb_url(purpose)
    if kind == "sqlite":
        return fresh_sqlite_url(directory, purpose)
    raise ValueError(f"unknown database kind {kind!r}")


def drop_made_databases() -> None:
    """Drop the PostgreSQL and MariaDB databases this process made (a session's end)."""
    drop_databases(postgres=sorted(_MADE["postgres"]), mariadb=sorted(_MADE["mariadb"]))
    _MADE["postgres"].clear()
    _MADE["mariadb"].clear()


def drop_databases(*, postgres: Sequence[str] = (), mariadb: Sequence[str] = ()) -> None:
    if postgres:
        admin = make_url(PG_BASE).set(database="postgres").render_as_string(hide_password=False)

        async def drop() -> None:
            conn = await asyncpg.connect(admin)
            try:
                for name in postgres:
                    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await conn.close()

        _run_asyncio(drop)
    if mariadb:
        base = make_url(MYSQL_BASE)
        conn = pymysql.connect(
            host=base.host or "127.0.0.1",
            port=base.port or 3306,
            user=base.username or "root",
            password=base.password or "",
        )
        try:
            with conn.cursor() as cursor:
                for name in mariadb:
                    cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            conn.close()


def _run_asyncio(fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run an asyncio coroutine function on a thread of its own, whatever loop is current."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(fn())
        except BaseException as e:
            failure.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


@pytest.fixture
def postgres_url() -> str:
    return fresh_postgres_url()


@pytest.fixture
def mariadb_url() -> str:
    return fresh_mariadb_url()


@pytest.fixture
def redis_url() -> str:
    return fresh_redis_url()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return fresh_sqlite_url(tmp_path)
