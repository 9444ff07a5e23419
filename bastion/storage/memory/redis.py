"""The memory store in Redis: one server, a Sentinel-watched master, or a Cluster
(``--memory-store-url``; see :mod:`storage.memory.redis_topology` for the URL forms and
the client each one gets: bastion's trio client, or redis-py's in threads for a Cluster).

Operations that read and write run as one command
(``GETDEL``, ``SET NX PX``) or one Lua script (counter with TTL, token bucket) on ONE key,
so they are atomic on every topology; the token bucket uses the Redis server's clock,
shared by every instance. The only multi-key commands are reads and deletes of keys that
need not be read or deleted together (``get_many``, ``delete``, ``set_many``): on a
Cluster, redis-py splits them by slot (``mget_nonatomic``, per-slot ``DEL``), so no key
needs a hash tag. ``set_many`` (with its optional index entry) is one pipeline: one round
trip on the trio client.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import trio

from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory.base import BUCKET_GRACE, Entry, check_bucket_args, check_ttl
from bastion.storage.memory.redis_topology import RedisClient, redis_client
from bastion.storage.memory.resp import Arg

__all__ = ["RedisMemoryStore"]

_INCR = """
local existed = redis.call('EXISTS', KEYS[1])
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and tonumber(ARGV[2]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return value
"""

_TOKEN_BUCKET = """
local rate, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = burst
if state[1] then
  tokens = math.min(burst, tonumber(state[1]) + math.max(0, now - tonumber(state[2])) * rate)
end
local allowed, wait = 0, 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait = (cost - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.6f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + tonumber(ARGV[4]))
return {allowed, string.format('%.17g', wait)}
"""

# A per-owner index: a sorted set scored by each member's expiry on the server's clock;
# the key itself lives as long as its longest-lived member.
_INDEX_ADD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
"""

_INDEX_MEMBERS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""

_GRACE_MS = math.ceil(BUCKET_GRACE * 1000)


class RedisMemoryStore:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        timeout: float = 10.0,
        client: RedisClient | None = None,
    ) -> None:
        """``client`` replaces the one ``url`` names (the benchmark compares two)."""
        self._timeout = timeout
        self._client = client or redis_client(url, pool_size=pool_size, timeout=timeout)

    @property
    def client(self) -> RedisClient:
        """The connection pool, for what keeps its own keys here (the authorization
        engine's generations: :mod:`storage.fga_generation`)."""
        return self._client

    def wrap_client(self, wrap: Callable[[RedisClient], RedisClient]) -> None:
        """Put ``wrap(client)`` in the client's place, before anything else took it (the
        tracer's spans around each round trip)."""
        self._client = wrap(self._client)

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._client.execute("GET", key)
        return value

    async def get_many(self, *keys: str) -> list[bytes | None]:
        if not keys:
            await trio.lowlevel.checkpoint()
            return []
        return await self._client.get_many(keys)

    async def set(self, key: str, value: bytes, ttl: float | None = None) -> None:
        check_ttl(ttl)
        await self._client.execute(*_set(key, value, ttl))

    async def set_many(
        self, entries: Sequence[Entry], *, index: tuple[str, str, float] | None = None
    ) -> None:
        for _, _, ttl in entries:
            check_ttl(ttl)
        if index is not None:
            check_ttl(index[2])
        if not entries and index is None:
            await trio.lowlevel.checkpoint()
            return
        sets = [_set(key, value, ttl) for key, value, ttl in entries]
        if index is None:
            await self._client.pipeline(sets)
            return
        key, member, ttl = index
        await self._client.pipeline(sets, (_INDEX_ADD, [key], [member, _ms(ttl) or 1]))

    async def set_if_absent(self, key: str, value: bytes, ttl: float | None = None) -> bool:
        check_ttl(ttl)
        stored = await self._client.execute(*_set(key, value, ttl), "NX")
        return bool(stored)

    async def delete(self, *keys: str) -> int:
        if not keys:
            await trio.lowlevel.checkpoint()
            return 0
        return await self._client.delete(keys)

    async def take(self, key: str) -> bytes | None:
        value: bytes | None = await self._client.execute("GETDEL", key)
        return value

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        check_ttl(ttl)
        value = await self._client.script(_INCR, [key], [amount, _ms(ttl) or 0])
        return int(value)

    async def delete_prefix(self, prefix: str) -> int:
        return await self._client.delete_matching(_glob_escape(prefix) + "*")

    async def index_add(self, key: str, member: str, ttl: float) -> None:
        check_ttl(ttl)
        await self._client.script(_INDEX_ADD, [key], [member, _ms(ttl) or 1])

    async def index_members(self, key: str) -> list[str]:
        found = await self._client.script(_INDEX_MEMBERS, [key], [])
        return sorted(member.decode() for member in found)

    async def index_remove(self, key: str, *members: str) -> None:
        if not members:
            await trio.lowlevel.checkpoint()
            return
        await self._client.execute("ZREM", key, *members)

    async def token_bucket(
        self, key: str, rate: float, burst: int, cost: int = 1
    ) -> tuple[bool, float]:
        check_bucket_args(rate, burst, cost)
        allowed, wait = await self._client.script(
            _TOKEN_BUCKET, [key], [repr(float(rate)), burst, cost, _GRACE_MS]
        )
        return allowed == 1, float(wait)

    def statistics(self) -> dict[str, int]:
        """Counters since start: calls that found Redis unreachable, master changes seen
        through Sentinel (failovers), and connections opened (not on a Cluster)."""
        return self._client.statistics()

    async def ping(self) -> None:
        try:
            with trio.fail_after(self._timeout):
                await self._client.ping()
        except trio.TooSlowError:
            raise StorageUnavailable("the redis memory store did not answer") from None

    async def aclose(self) -> None:
        await self._client.aclose()


def _set(key: str, value: bytes, ttl: float | None) -> list[Arg]:
    return ["SET", key, value] if ttl is None else ["SET", key, value, "PX", _ms(ttl) or 1]


def _ms(ttl: float | None) -> int | None:
    return None if ttl is None else max(1, math.ceil(ttl * 1000))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "\\*?[]" else c for c in text)
