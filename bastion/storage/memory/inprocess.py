"""The memory store as a dict in this process (``--memory-store-url memory://``).

For a single instance and for tests. Each operation runs without yielding to the trio
scheduler between its read and its write, so it is atomic among trio tasks. Expired keys
are ignored when read and swept out at most once a minute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from bastion.storage.memory.base import (
    BucketState,
    Entry,
    bucket_ttl,
    check_bucket_args,
    check_ttl,
    spend,
)

__all__ = ["InProcessMemoryStore"]

_SWEEP_INTERVAL = 60.0


class InProcessMemoryStore:
    def __init__(self, clock: Callable[[], float] = trio.current_time) -> None:
        """``clock`` is monotonic seconds; trio's by default, so ``MockClock`` drives expiry."""
        self._clock = clock
        self._data: dict[str, tuple[bytes, float | None]] = {}
        self._next_sweep: float | None = None
        self._indexes: dict[str, dict[str, float]] = {}

    async def get(self, key: str) -> bytes | None:
        await trio.lowlevel.checkpoint()
        return self._live(key)

    async def get_many(self, *keys: str) -> list[bytes | None]:
        await trio.lowlevel.checkpoint()
        return [self._live(key) for key in keys]

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        await trio.lowlevel.checkpoint()
        check_ttl(ttl)
        self._put(key, value, ttl)

    async def set_many(
        self, entries: Sequence[Entry], *, index: tuple[str, str, float] | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()
        for _, _, ttl in entries:
            check_ttl(ttl)
        if index is not None:
            check_ttl(index[2])
        for key, value, ttl in entries:
            self._put(key, value, ttl)
        if index is not None:
            await self.index_add(*index)

    async def set_if_absent(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        await trio.lowlevel.checkpoint()
        check_ttl(ttl)
        if self._live(key) is not None:
            return False
        self._put(key, value, ttl)
        return True

    async def delete(self, *keys: str) -> int:
        await trio.lowlevel.checkpoint()
        return sum(self._pop(key) is not None for key in set(keys))

    async def take(self, key: str) -> bytes | None:
        await trio.lowlevel.checkpoint()
        return self._pop(key)

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        await trio.lowlevel.checkpoint()
        check_ttl(ttl)
        current = self._live(key)
        if current is None:
            value = amount
            self._put(key, str(value).encode(), ttl)
        else:
            value = int(current) + amount
            self._data[key] = (str(value).encode(), self._data[key][1])
        return value

    async def delete_prefix(self, prefix: str) -> int:
        await trio.lowlevel.checkpoint()
        doomed = [key for key in self._data if key.startswith(prefix)]
        return sum(self._pop(key) is not None for key in doomed)

    async def index_add(self, key: str, member: str, ttl: float) -> None:
        await trio.lowlevel.checkpoint()
        check_ttl(ttl)
        self._indexes.setdefault(key, {})[member] = self._clock() + ttl

    async def index_members(self, key: str) -> list[str]:
        await trio.lowlevel.checkpoint()
        return sorted(self._live_index(key))

    async def index_remove(self, key: str, *members: str) -> None:
        await trio.lowlevel.checkpoint()
        index = self._live_index(key)
        for member in members:
            index.pop(member, None)
        if not index:
            self._indexes.pop(key, None)

    async def token_bucket(
        self, key: str, rate: float, burst: int, cost: int = 1
    ) -> tuple[bool, float]:
        await trio.lowlevel.checkpoint()
        check_bucket_args(rate, burst, cost)
        raw = self._live(key)
        now = self._clock()
        state, allowed, retry_after = spend(
            None if raw is None else BucketState.decode(raw), now, rate, burst, cost
        )
        self._put(key, state.encode(), bucket_ttl(state, rate, burst))
        return allowed, retry_after

    async def ping(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self._data.clear()
        self._indexes.clear()

    def _live_index(self, key: str) -> dict[str, float]:
        """The index at ``key``, its expired members dropped (created if absent)."""
        now = self._clock()
        index = self._indexes.get(key, {})
        for member in [m for m, until in index.items() if until <= now]:
            del index[member]
        return index

    def _live(self, key: str) -> bytes | None:
        entry = self._data.get(key)
        if entry is None:
            return None
        value, expires_at = entry
        if expires_at is not None and expires_at <= self._clock():
            del self._data[key]
            return None
        return value

    def _pop(self, key: str) -> bytes | None:
        value = self._live(key)
        self._data.pop(key, None)
        return value

    def _put(self, key: str, value: bytes, ttl: float | None) -> None:
        now = self._clock()
        self._data[key] = (value, None if ttl is None else now + ttl)
        if self._next_sweep is None or now >= self._next_sweep:
            self._next_sweep = now + _SWEEP_INTERVAL
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        expired = [k for k, (_, exp) in self._data.items() if exp is not None and exp <= now]
        for key in expired:
            del self._data[key]
        for key in list(self._indexes):
            if not self._live_index(key):
                del self._indexes[key]
