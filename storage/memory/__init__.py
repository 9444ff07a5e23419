"""Memory stores: SQL-backed (default), in-process, Redis; one protocol, one test suite."""

from __future__ import annotations

from storage.memory.base import MemoryStore
from storage.memory.inprocess import InProcessMemoryStore
from storage.memory.redis import RedisMemoryStore
from storage.memory.sql import SqlMemoryStore
from storage.sql.database import Database

__all__ = [
    "InProcessMemoryStore",
    "MemoryStore",
    "RedisMemoryStore",
    "SqlMemoryStore",
    "memory_store_for",
]


def memory_store_for(url: str, db: Database, *, pool_size: int, timeout: float) -> MemoryStore:
    """The store that ``--memory-store-url`` names: "" = SQL, memory://, redis(s)://."""
    if url == "":
        return SqlMemoryStore(db)
    if url.lower() == "memory://":
        return InProcessMemoryStore()
    if url.partition("://")[0].lower() in ("redis", "rediss"):
        return RedisMemoryStore(url, pool_size=pool_size, timeout=timeout)
    raise ValueError(
        "unsupported memory store URL: expected memory://, redis://, rediss:// or none"
    )
