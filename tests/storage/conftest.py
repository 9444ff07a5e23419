"""Every database and memory store the storage suite runs against.

One migrated database per kind is made once per test session (per xdist worker) and
shared; tests keep out of each other's way with fresh uuids. Tests of migrations ask for
a fresh, empty database instead (``fresh_database_url``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from bastion.storage import StorageConfig, open_storage
from bastion.storage.memory import (
    InProcessMemoryStore,
    MemoryStore,
    RedisMemoryStore,
    SqlMemoryStore,
)
from bastion.storage.sql import Database, open_database
from tests.dbfixtures import fresh_database_url, fresh_redis_url
from tests.redis_topologies import redis_cluster, sentinel_set
from tests.storage.helpers import asyncpg_url, config_for

#: "postgres" runs the default driver (psycopg); "postgres-asyncpg" the other one.
DATABASES = ["sqlite", "postgres", "postgres-asyncpg", "mariadb"]
MEMORY_STORES = [
    "inprocess",
    "redis",
    "redis-sentinel",
    "redis-cluster",
    "sql-sqlite",
    "sql-postgres",
    "sql-mariadb",
]


async def _migrate(config: StorageConfig) -> None:
    async with open_storage(config):
        pass


@pytest.fixture(scope="session")
def shared_database_urls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """kind -> URL of a migrated database, made on first use."""
    return _LazyDatabases(tmp_path_factory.mktemp("sqlite"))


class _LazyDatabases(dict[str, str]):
    def __init__(self, directory: Path) -> None:
        super().__init__()
        self._directory = directory

    def __missing__(self, kind: str) -> str:
        url = fresh_database_url(kind, self._directory, purpose="storage")
        trio.run(_migrate, config_for(kind, url))
        self[kind] = url
        return url


@pytest.fixture(scope="session")
def redis_topologies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """kind -> URL of a real Sentinel set or Cluster, started on first use, stopped at the
    end of the session."""
    with contextlib.ExitStack() as stack:
        yield _LazyTopologies(tmp_path_factory.mktemp("redis-topologies"), stack)


class _LazyTopologies(dict[str, str]):
    def __init__(self, directory: Path, stack: contextlib.ExitStack) -> None:
        super().__init__()
        self._directory, self._stack = directory, stack

    def __missing__(self, kind: str) -> str:
        if kind == "redis-sentinel":
            url = self._stack.enter_context(sentinel_set(self._directory / kind)).url()
        elif kind == "redis-cluster":
            url = self._stack.enter_context(redis_cluster(self._directory / kind)).url()
        else:
            raise KeyError(kind)
        self[kind] = url
        return url


@pytest.fixture(params=DATABASES)
def database_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def database_config(database_kind: str, shared_database_urls: dict[str, str]) -> StorageConfig:
    """A migrated database of ``database_kind`` (made outside trio: a sync fixture)."""
    if database_kind == "postgres-asyncpg":
        return config_for("postgres", asyncpg_url(shared_database_urls["postgres"]))
    return config_for(database_kind, shared_database_urls[database_kind])


@pytest.fixture
async def database(database_config: StorageConfig) -> AsyncIterator[Database]:
    async with open_database(database_config) as db:
        yield db


@pytest.fixture(params=MEMORY_STORES)
def memory_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def memory_backend_url(
    memory_kind: str, shared_database_urls: dict[str, str], request: pytest.FixtureRequest
) -> str:
    """The Redis URL, or the database URL of a SQL-backed store ("" for in-process)."""
    if memory_kind == "redis":
        return fresh_redis_url()
    if memory_kind.startswith("redis-"):
        topologies: dict[str, str] = request.getfixturevalue("redis_topologies")
        return topologies[memory_kind]
    if memory_kind.startswith("sql-"):
        return shared_database_urls[memory_kind.removeprefix("sql-")]
    return ""


@pytest.fixture
async def memory_store(memory_kind: str, memory_backend_url: str) -> AsyncIterator[MemoryStore]:
    if memory_kind == "inprocess":
        store: MemoryStore = InProcessMemoryStore()
    elif memory_kind.startswith("redis"):
        store = RedisMemoryStore(memory_backend_url, pool_size=10, timeout=5)
    else:
        kind = memory_kind.removeprefix("sql-")
        async with open_database(config_for(kind, memory_backend_url)) as db:
            yield SqlMemoryStore(db)
        return
    try:
        yield store
    finally:
        await store.aclose()
