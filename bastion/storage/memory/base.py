"""The memory store: short-lived shared state (sessions, challenges, counters, rate limits).

Every operation is atomic on every backend, and every key with a TTL expires on every
backend. Values are bytes; counters are stored as ASCII decimal (so ``get`` of a counter
returns ``b"3"``), as in Redis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "BUCKET_GRACE",
    "BucketState",
    "Entry",
    "MemoryStore",
    "bucket_ttl",
    "check_bucket_args",
    "check_ttl",
    "spend",
]


#: One ``set_many`` item: key, value, and seconds to live (``None`` = until deleted).
Entry = tuple[str, bytes, float | None]


class MemoryStore(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def get_many(self, *keys: str) -> list[bytes | None]:
        """The values of ``keys``, in order (``None`` for absent); one round trip."""
        ...

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store ``value``; ``ttl`` seconds to live, ``None`` = until deleted."""
        ...

    async def set_many(
        self, entries: Sequence[Entry], *, index: tuple[str, str, float] | None = None
    ) -> None:
        """``set`` each entry, then ``index_add(*index)`` if given; one round trip where
        the backend allows (not atomic as a whole: each key is written as ``set`` and
        ``index_add`` write it)."""
        ...

    async def set_if_absent(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        """Store ``value`` only if ``key`` is absent (or expired); True if stored."""
        ...

    async def delete(self, *keys: str) -> int:
        """Delete ``keys``; return how many existed."""
        ...

    async def take(self, key: str) -> bytes | None:
        """Get and delete in one step: of concurrent takers of one key, only one gets it."""
        ...

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Add ``amount`` to the counter (0 if absent); ``ttl`` applies when it is created."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every key starting with ``prefix``; return how many existed."""
        ...

    async def index_add(self, key: str, member: str, ttl: float) -> None:
        """Add ``member`` to the set at ``key`` for ``ttl`` seconds (a per-owner index, so a
        listing reads one key instead of scanning); re-adding renews its time."""
        ...

    async def index_members(self, key: str) -> list[str]:
        """The members of the set at ``key`` whose time has not run out."""
        ...

    async def index_remove(self, key: str, *members: str) -> None:
        """Remove ``members`` from the set at ``key``."""
        ...

    async def token_bucket(
        self, key: str, rate: float, burst: int, cost: int = 1
    ) -> tuple[bool, float]:
        """Spend ``cost`` tokens from a bucket refilled at ``rate`` per second, holding at
        most ``burst``. Returns (allowed, seconds until it would be allowed; 0.0 if
        allowed). The bucket's state expires once it would be full again."""
        ...

    async def ping(self) -> None:
        """Raise ``StorageUnavailable`` unless the store answers promptly."""
        ...

    async def aclose(self) -> None: ...


def check_ttl(ttl: float | None) -> None:
    if ttl is not None and not ttl > 0:
        raise ValueError(f"ttl must be positive, got {ttl}")


def check_bucket_args(rate: float, burst: int, cost: int) -> None:
    if not rate > 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be positive, got {rate}")
    if burst < 1:
        raise ValueError(f"burst must be at least 1, got {burst}")
    if not 1 <= cost <= burst:
        raise ValueError(f"cost must be between 1 and burst ({burst}), got {cost}")


@dataclass(frozen=True)
class BucketState:
    tokens: float
    at: float  #: when ``tokens`` was measured (the store's clock)

    def encode(self) -> bytes:
        return f"{self.tokens!r} {self.at!r}".encode()

    @classmethod
    def decode(cls, raw: bytes) -> BucketState:
        tokens, at = raw.split()
        return cls(float(tokens), float(at))


def spend(
    state: BucketState | None, now: float, rate: float, burst: int, cost: int
) -> tuple[BucketState, bool, float]:
    """The token-bucket rule shared by the in-process and SQL stores (Redis runs it in Lua).

    Returns the new state, whether ``cost`` was spent, and the wait before it could be.
    """
    tokens = float(burst) if state is None else state.tokens + max(0.0, now - state.at) * rate
    tokens = min(float(burst), tokens)
    if tokens >= cost:
        return BucketState(tokens - cost, now), True, 0.0
    return BucketState(tokens, now), False, (cost - tokens) / rate


#: Kept past the moment a bucket is full again: a missing state means a full bucket.
BUCKET_GRACE = 0.1


def bucket_ttl(state: BucketState, rate: float, burst: int) -> float:
    """How long until the bucket is full again, after which its state can go."""
    return (burst - state.tokens) / rate + BUCKET_GRACE
