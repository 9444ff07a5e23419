"""open_storage wires the database, the migrations and the memory store the flags name."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from bastion.core.errors import Unavailable
from bastion.storage import StorageConfig, open_storage
from bastion.storage.memory import InProcessMemoryStore, RedisMemoryStore, SqlMemoryStore
from bastion.storage.sql.migrate import current_revision, head_revision
from tests.dbfixtures import fresh_redis_url


@pytest.fixture
def redis_memory_url() -> str:
    return fresh_redis_url()


@pytest.mark.parametrize(
    ("memory_url", "store_type"),
    [("", SqlMemoryStore), ("memory://", InProcessMemoryStore), ("redis", RedisMemoryStore)],
)
async def test_memory_store_follows_the_url(
    tmp_path: Path, redis_memory_url: str, memory_url: str, store_type: type
) -> None:
    config = StorageConfig(
        database_type="sqlite",
        database_url=str(tmp_path / "bastion.db"),
        memory_store_url=redis_memory_url if memory_url == "redis" else memory_url,
    )
    async with open_storage(config) as storage:
        assert isinstance(storage.memory, store_type)
        await storage.memory.set("session:1", b"v", ttl=60)
        assert await storage.memory.get("session:1") == b"v"
        await storage.ping()
        assert await storage.db.run(current_revision) == head_revision()


async def test_sql_memory_store_writes_service_memory(tmp_path: Path) -> None:
    config = StorageConfig(database_type="sqlite", database_url=str(tmp_path / "m.db"))
    async with open_storage(config) as storage:
        await storage.memory.set("challenge:abc", b"state", ttl=60)
        rows = await storage.db.run(
            lambda conn: conn.execute(sa.text("SELECT key, value FROM service_memory")).all()
        )
    assert [(k, bytes(v)) for k, v in rows] == [("challenge:abc", b"state")]


async def test_migrations_can_be_skipped(tmp_path: Path) -> None:
    config = StorageConfig(
        database_type="sqlite", database_url=str(tmp_path / "n.db"), run_migrations=False
    )
    async with open_storage(config) as storage:
        assert await storage.db.run(current_revision) is None


async def test_unknown_memory_store_url(tmp_path: Path) -> None:
    config = StorageConfig(
        database_type="sqlite",
        database_url=str(tmp_path / "u.db"),
        memory_store_url="memcached://127.0.0.1",
    )
    with pytest.raises(ValueError, match="memory store URL"):
        async with open_storage(config):
            pass


def test_public_exports() -> None:
    from bastion import storage

    assert sorted(storage.__all__) == [
        "SUPPORTED_DATABASE_TYPES",
        "SchemaMismatch",
        "Storage",
        "StorageConfig",
        "StorageUnavailable",
        "open_storage",
        "reserved_connections",
    ]
    for name in storage.__all__:
        assert getattr(storage, name) is not None
    assert issubclass(storage.StorageUnavailable, Unavailable)
