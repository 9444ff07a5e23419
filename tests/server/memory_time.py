"""Let time pass for single memory-store entries of a running server, without waiting.

Challenges, their attempt counters and the "recently passed a second factor" marks are
memory-store entries whose lifetime is their TTL. To test what happens when one runs
out, a test makes that entry's TTL run out NOW, through the store itself (the SQL table's
``expires_at``, Redis' ``PEXPIRE``), exactly as the passing of its lifetime would; the
server's own reads then decide. :meth:`MemoryEntries.age` moves a stored challenge's
``issued_at`` back (for the resend interval), keeping its TTL.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from typing import Any

import redis


class MemoryEntries:
    """The memory store of a server: its SQLite database (the SQL-backed store) or Redis."""

    def __init__(self, *, sqlite_path: str | None = None, redis_url: str | None = None) -> None:
        if (sqlite_path is None) == (redis_url is None):
            raise ValueError("one of sqlite_path, redis_url")
        self._sqlite = sqlite_path
        self._redis = redis_url

    def _sql(self, query: str, *args: Any) -> list[Any]:
        assert self._sqlite is not None
        with contextlib.closing(sqlite3.connect(self._sqlite, timeout=30)) as conn, conn:
            return conn.execute(query, args).fetchall()

    def exists(self, key: str) -> bool:
        if self._sqlite is not None:
            rows = self._sql(
                "SELECT 1 FROM service_memory WHERE key = ? AND "
                "(expires_at IS NULL OR expires_at > ?)",
                key,
                time.time(),
            )
            return bool(rows)
        with contextlib.closing(redis.Redis.from_url(self._redis or "")) as client:
            return bool(client.exists(key))

    def expire(self, key: str) -> None:
        """The entry's lifetime is over now."""
        assert self.exists(key), f"no live entry {key}"
        if self._sqlite is not None:
            self._sql(
                "UPDATE service_memory SET expires_at = ? WHERE key = ?", time.time() - 1, key
            )
        else:
            with contextlib.closing(redis.Redis.from_url(self._redis or "")) as client:
                client.pexpire(key, 1)
                while client.exists(key):  # Redis drops it within the millisecond
                    time.sleep(0.005)
        assert not self.exists(key)

    def read_json(self, key: str) -> Any:
        if self._sqlite is not None:
            rows = self._sql("SELECT value FROM service_memory WHERE key = ?", key)
            return json.loads(rows[0][0])
        with contextlib.closing(redis.Redis.from_url(self._redis or "")) as client:
            raw = client.get(key)
        assert raw is not None, key
        return json.loads(raw)

    def write_json(self, key: str, value: Any) -> None:
        """Replace the value, keeping the entry's expiry."""
        data = json.dumps(value).encode()
        if self._sqlite is not None:
            self._sql("UPDATE service_memory SET value = ? WHERE key = ?", data, key)
        else:
            with contextlib.closing(redis.Redis.from_url(self._redis or "")) as client:
                assert client.set(key, data, keepttl=True, xx=True)

    def age(self, key: str, seconds: int) -> None:
        """The stored challenge was issued ``seconds`` earlier (its TTL is unchanged)."""
        challenge = self.read_json(key)
        challenge["issued_at"] -= seconds
        self.write_json(key, challenge)
