"""The memory store in the main SQL database (the default): table ``service_memory``.

Lets several instances that share a database share sessions, challenges and rate limits
without Redis. Every read-modify-write runs under ``Database.run_locked`` on the key, so
it is atomic across instances; plain deletes need no lock. Rows past ``expires_at`` are
ignored by every read; the background prune (``--prune-interval``,
:mod:`storage.retention`) deletes them in batches, one process per interval.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import sqlalchemy as sa
import trio

from bastion.storage.memory.base import (
    BucketState,
    Entry,
    bucket_ttl,
    check_bucket_args,
    check_ttl,
    spend,
)
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import memory

__all__ = ["SqlMemoryStore"]

T = TypeVar("T")

_MAX_KEY_LENGTH = 255
_LIVE = sa.or_(memory.c.expires_at.is_(None), memory.c.expires_at > sa.bindparam("now"))


class SqlMemoryStore:
    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        """``clock`` is Unix seconds; instances sharing a database share its meaning."""
        self._db = db
        self._clock = clock

    async def get(self, key: str) -> bytes | None:
        _check_key(key)
        now = self._clock()
        return await self._db.read(lambda conn: _read(conn, key, now))

    async def get_many(self, *keys: str) -> list[bytes | None]:
        for key in keys:
            _check_key(key)
        if not keys:
            await trio.lowlevel.checkpoint()
            return []
        now = self._clock()

        def work(conn: sa.Connection) -> list[bytes | None]:
            rows = conn.execute(
                sa.select(memory.c.key, memory.c.value).where(memory.c.key.in_(set(keys)), _LIVE),
                {"now": now},
            ).all()
            found = {row.key: bytes(row.value) for row in rows}
            return [found.get(key) for key in keys]

        return await self._db.read(work)

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        _check_key(key)
        check_ttl(ttl)
        now = self._clock()
        await self._locked(key, lambda conn: _write(conn, key, value, _expiry(now, ttl)))

    async def set_many(
        self, entries: Sequence[Entry], *, index: tuple[str, str, float] | None = None
    ) -> None:
        """One locked write per key, as ``set``: the database's locks are one key each."""
        for key, _, ttl in entries:
            _check_key(key)
            check_ttl(ttl)
        if index is not None:
            _check_key(index[0])
            check_ttl(index[2])
        if not entries and index is None:
            await trio.lowlevel.checkpoint()
        for key, value, ttl in entries:
            await self.set(key, value, ttl)
        if index is not None:
            await self.index_add(*index)

    async def set_if_absent(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        _check_key(key)
        check_ttl(ttl)
        now = self._clock()

        def work(conn: sa.Connection) -> bool:
            if _read(conn, key, now) is not None:
                return False
            _write(conn, key, value, _expiry(now, ttl))
            return True

        return await self._locked(key, work)

    async def delete(self, *keys: str) -> int:
        if not keys:
            await trio.lowlevel.checkpoint()
            return 0
        for key in keys:
            _check_key(key)
        return await self._delete_where(memory.c.key.in_(set(keys)))

    async def take(self, key: str) -> bytes | None:
        _check_key(key)
        now = self._clock()

        def work(conn: sa.Connection) -> bytes | None:
            value = _read(conn, key, now)
            deleted = conn.execute(sa.delete(memory).where(memory.c.key == key)).rowcount
            # Only the transaction whose delete removed the row may hand out the value.
            return value if deleted == 1 else None

        return await self._locked(key, work)

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        _check_key(key)
        check_ttl(ttl)
        now = self._clock()

        def work(conn: sa.Connection) -> int:
            current = _read(conn, key, now)
            if current is None:
                _write(conn, key, str(amount).encode(), _expiry(now, ttl))
                return amount
            value = int(current) + amount
            conn.execute(
                sa.update(memory).where(memory.c.key == key).values(value=str(value).encode())
            )
            return value

        return await self._locked(key, work)

    async def delete_prefix(self, prefix: str) -> int:
        _check_key(prefix)
        # LIKE narrows (and may use the index); substr makes it exact where LIKE ignores
        # case (SQLite).
        matches = sa.and_(
            memory.c.key.startswith(prefix, autoescape=True),
            sa.func.substr(memory.c.key, 1, len(prefix)) == prefix,
        )
        return await self._delete_where(matches)

    async def index_add(self, key: str, member: str, ttl: float) -> None:
        """The index is one row: a JSON map of member to expiry, rewritten under its lock."""
        _check_key(key)
        check_ttl(ttl)
        now = self._clock()

        def work(conn: sa.Connection) -> None:
            index = _live_index(conn, key, now)
            index[member] = now + ttl
            _write(conn, key, json.dumps(index).encode(), max(index.values()))

        await self._locked(key, work)

    async def index_members(self, key: str) -> list[str]:
        _check_key(key)
        now = self._clock()
        return sorted(await self._db.read(lambda conn: _live_index(conn, key, now)))

    async def index_remove(self, key: str, *members: str) -> None:
        _check_key(key)
        now = self._clock()

        def work(conn: sa.Connection) -> None:
            index = _live_index(conn, key, now)
            for member in members:
                index.pop(member, None)
            if index:
                _write(conn, key, json.dumps(index).encode(), max(index.values()))
            else:
                conn.execute(sa.delete(memory).where(memory.c.key == key))

        await self._locked(key, work)

    async def token_bucket(
        self, key: str, rate: float, burst: int, cost: int = 1
    ) -> tuple[bool, float]:
        _check_key(key)
        check_bucket_args(rate, burst, cost)
        now = self._clock()

        def work(conn: sa.Connection) -> tuple[bool, float]:
            raw = _read(conn, key, now)
            state, allowed, retry_after = spend(
                None if raw is None else BucketState.decode(raw), now, rate, burst, cost
            )
            _write(conn, key, state.encode(), now + bucket_ttl(state, rate, burst))
            return allowed, retry_after

        return await self._locked(key, work)

    async def ping(self) -> None:
        await self._db.ping()

    async def aclose(self) -> None:
        """Nothing of its own to close: the database belongs to the caller."""
        await trio.lowlevel.checkpoint()

    async def _locked(self, key: str, fn: Callable[[sa.Connection], T]) -> T:
        return await self._db.run_locked("memory:" + key, fn)

    async def _delete_where(self, condition: sa.ColumnElement[bool]) -> int:
        now = self._clock()

        def work(conn: sa.Connection) -> int:
            conn.execute(
                sa.delete(memory).where(condition, memory.c.expires_at <= now)
            )  # expired: gone already, not counted
            return conn.execute(sa.delete(memory).where(condition)).rowcount

        return await self._db.run(work, write=True)


def _check_key(key: str) -> None:
    if len(key) > _MAX_KEY_LENGTH:
        raise ValueError(f"memory store keys are at most {_MAX_KEY_LENGTH} characters")


def _expiry(now: float, ttl: float | None) -> float | None:
    return None if ttl is None else now + ttl


def _read(conn: sa.Connection, key: str, now: float) -> bytes | None:
    value = conn.execute(
        sa.select(memory.c.value).where(memory.c.key == key, _LIVE), {"now": now}
    ).scalar_one_or_none()
    return None if value is None else bytes(value)


def _live_index(conn: sa.Connection, key: str, now: float) -> dict[str, float]:
    raw = _read(conn, key, now)
    index: dict[str, float] = {} if raw is None else json.loads(raw)
    return {member: until for member, until in index.items() if until > now}


def _write(conn: sa.Connection, key: str, value: bytes, expires_at: float | None) -> None:
    """Insert or overwrite; the caller holds the key's lock, so nobody races the insert."""
    updated = conn.execute(
        sa.update(memory).where(memory.c.key == key).values(value=value, expires_at=expires_at)
    ).rowcount
    if updated == 0:
        conn.execute(sa.insert(memory).values(key=key, value=value, expires_at=expires_at))
