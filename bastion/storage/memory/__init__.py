"""Memory stores: SQL-backed (default), in-process, Redis; one protocol, one test suite."""

from __future__ import annotations

from bastion.core.redis_url import MEMORY_STORE_SCHEMES
from bastion.storage.memory.base import MemoryStore
from bastion.storage.memory.inprocess import InProcessMemoryStore
from bastion.storage.memory.redis import RedisMemoryStore
from bastion.storage.memory.sql import SqlMemoryStore
from bastion.storage.sql.database import Database

__all__ = [
    "InProcessMemoryStore",
    "MemoryStore",
    "RedisMemoryStore",
    "SqlMemoryStore",
    "memory_store_for",
]


def memory_store_for(url: str, db: Database, *, pool_size: int, timeout: float) -> MemoryStore:
    """The store that ``--memory-store-url`` names: "" = SQL, memory://, Redis (one server,
    Sentinel or Cluster: :data:`MEMORY_STORE_SCHEMES`)."""
    if url == "":
        return SqlMemoryStore(db)
    if url.lower() == "memory://":
        return InProcessMemoryStore()
    if url.partition("://")[0].lower() in MEMORY_STORE_SCHEMES:
        return RedisMemoryStore(url, pool_size=pool_size, timeout=timeout)
    raise ValueError(
        "unsupported memory store URL: expected memory://, redis://, rediss://, "
        "redis+sentinel://, redis+cluster:// (or their rediss+ forms) or none"
    )
