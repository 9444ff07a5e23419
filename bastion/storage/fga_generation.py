"""A store's *generation* in Redis: what lets a process skip the SQL revision probe.

Without it, every check and list request starts with the store's revision read from SQL
(:meth:`FgaStore.revision`, an indexed ``max`` through a worker thread). When the memory
store is Redis (``--memory-store-url=redis://...``), every write through bastion also
announces itself there, and a process asks SQL only when an announcement says something
may have changed since its last refresh. One key per store,
``fga:generation:<store id>``, a sorted set of:

- ``g:<token>`` (score ``+inf``): the current generation, a token never used before
  (random per process, then counted). A write that committed replaces it; so does a
  reader finding it missing (Redis restarted empty, evicted it, a new store).
- ``w:<id>`` (score: when its lease ends, on the Redis server's clock): a write in
  progress. It is added BEFORE the SQL transaction starts and removed, with the token
  replaced, AFTER it committed (:meth:`GatedFgaStore.write_tuples` and the others).

A reader (:meth:`Generations.read`: one plain read of the key, and the script below only
when the key holds anything but the one token) gets the token only when no write is in
progress; otherwise ``None``, and the engine reads SQL. Why a
process that read token ``T``, then refreshed from SQL, may later skip its SQL read when
it reads ``T`` again (see :class:`~service.fga.engine.EngineState`):

- A write that committed before the first read of ``T`` had either announced itself
  already (so the refresh, which came after the read, includes it), or still showed as
  in progress, in which case the read was ``None``, not ``T``.
- A write that committed after the first read of ``T`` was in progress at its commit, so
  the second read either shows it in progress (``None``) or finds the token it replaced.

Hence the order: the generation is read BEFORE the SQL refresh it authorises. Read after,
a write committing between the two (and announcing itself before the read) would leave
the process with the new token and an index without that write, skipping it for good.
A counter instead of fresh tokens would not do: once Redis lost the key, counting again
from zero can reach the very value a process last refreshed under.

Failures, all of them towards SQL:

- Redis not answering a reader: ``None``, the reader probes SQL.
- Redis not answering a writer BEFORE its write: the write is refused
  (``StorageUnavailable``: 503 ``unavailable``) with nothing written, because readers that
  still reach Redis would not know of it.
- Redis not answering AFTER the commit (or the write's outcome is unknown: cancelled,
  timed out): the write's ``w:`` entry stays, so every reader keeps probing SQL until its
  lease (:data:`LEASE`, far longer than any write can take) ends; the reader that then
  drops it also replaces the token, so no process skips over that write. A write that
  committed returns success: it is stored and every process will use it.

What the generation cannot cover: a write Redis acknowledged and then lost (a failover to
a replica that had not received it, with asynchronous replication), which leaves a stale
token in place until the next write; the same holds for every other security state the
memory store keeps (sessions, single-use codes). And writes made to the database by
anything but this code (a hand-made SQL change, a bastion version from before this
module during a rolling upgrade) announce nothing. ``consistent`` requests
(``HIGHER_CONSISTENCY``) always read SQL.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Sequence

import trio

from bastion.core.fga.tuples import TupleKey
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import (
    Change,
    Fetched,
    FgaStore,
    Head,
    Read,
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
    TuplePage,
    WriteOptions,
)
from bastion.storage.memory.redis_topology import CommandAhead, RedisClient

__all__ = ["LEASE", "GatedFgaStore", "Generations"]

log = logging.getLogger("bastion.storage.fga")

#: Seconds a write's ``w:`` entry lasts if the write never announces its end: far past
#: any write (each statement and lock wait is bounded by the database timeout).
LEASE = 600.0
_NO_OPTIONS = WriteOptions()

_NOW_MS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# ARGV[1]: a token to install if the generation is missing or a lease ended.
_READ = (
    _NOW_MS
    + """
local lapsed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local current = redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf')
local writing = redis.call('ZCARD', KEYS[1]) - #current
if #current == 0 or lapsed > 0 then
  for _, member in ipairs(current) do redis.call('ZREM', KEYS[1], member) end
  current = {'g:' .. ARGV[1]}
  redis.call('ZADD', KEYS[1], '+inf', current[1])
end
if writing > 0 then return false end
return current[1]
"""
)

# ARGV[1]: the write's id, ARGV[2]: its lease in milliseconds.
_BEGIN = (
    _NOW_MS
    + """
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), 'w:' .. ARGV[1])
"""
)

# ARGV[1]: the write's id, ARGV[2]: the new generation's token.
_END = """
redis.call('ZREM', KEYS[1], 'w:' .. ARGV[1])
for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '+inf', '+inf')) do
  redis.call('ZREM', KEYS[1], member)
end
redis.call('ZADD', KEYS[1], '+inf', 'g:' .. ARGV[2])
"""


class Generations:
    """Every store's generation in one Redis (the memory store's client)."""

    def __init__(self, client: RedisClient, *, lease: float = LEASE) -> None:
        self._client = client
        self._lease_ms = max(1, round(lease * 1000))
        # Unique across processes and restarts without a random draw per call.
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count()
        #: Reads by outcome: ``current`` (a token), ``writing`` (a write in progress) and
        #: ``unavailable`` (Redis failed: the engine probes SQL).
        self.reads = {"current": 0, "writing": 0, "unavailable": 0}
        self._down = False

    def _unique(self) -> str:
        return f"{self._prefix}.{next(self._counter)}"

    def read_ahead(self, store_id: str) -> CommandAhead:
        """:meth:`read`'s first command, put on board the calling task's next Redis
        request (give it to :meth:`read`, or ``drop`` it)."""
        return self._client.execute_ahead("ZRANGE", _key(store_id), 0, -1)

    async def read(self, store_id: str, ahead: CommandAhead | None = None) -> bytes | None:
        """The store's generation; ``None`` when a write is in progress or Redis failed.
        ``ahead``: its first command, asked for earlier (:meth:`read_ahead`).

        The key holding one ``g:`` member only (no write in progress, none lapsed) is
        the usual case: a plain read answers it, which is what the script would answer.
        Anything else (a write's entry, no key at all) is the script's to settle.
        """
        key = _key(store_id)
        try:
            members = await (
                ahead.result() if ahead is not None else self._client.execute("ZRANGE", key, 0, -1)
            )
            found: bytes | None
            if len(members) == 1 and members[0].startswith(b"g:"):
                found = members[0]
            else:
                found = await self._client.script(_READ, [key], [self._unique()])
        except Exception as exc:  # whatever failed, SQL answers instead
            self.reads["unavailable"] += 1
            if not self._down:
                self._down = True
                log.warning(
                    "authorization generation unreadable in redis: the engine probes SQL",
                    extra={"error": " ".join(str(exc).split())[:300]},
                )
            return None
        if self._down:
            self._down = False
            log.warning("authorization generation readable in redis again")
        self.reads["current" if found is not None else "writing"] += 1
        return found

    async def begin(self, store_id: str, *, lease: float | None = None) -> str:
        """Announce a write about to start; its id. ``lease``: seconds, for a write that
        may outlast the usual lease (a bulk import). Raises ``StorageUnavailable``."""
        write_id = self._unique()
        lease_ms = self._lease_ms if lease is None else max(1, round(lease * 1000))
        try:
            await self._client.script(_BEGIN, [_key(store_id)], [write_id, lease_ms])
        except StorageUnavailable:
            raise
        except Exception as exc:
            raise StorageUnavailable("cannot announce an authorization write in redis") from exc
        return write_id

    async def end(self, store_id: str, write_id: str) -> None:
        """Announce that the write ended (committed or rolled back): a new generation.

        Never raises: a failure leaves the write's entry, readers probe SQL until its
        lease ends. Shielded: a cancelled caller's write has happened all the same.
        """
        with trio.CancelScope(shield=True):
            try:
                await self._client.script(_END, [_key(store_id)], [write_id, self._unique()])
            except Exception as exc:  # the lease covers it
                log.warning(
                    "authorization write not announced in redis: "
                    "every process probes SQL until the lease ends",
                    extra={"error": " ".join(str(exc).split())[:300], "lease": self._lease_ms},
                )


def _key(store_id: str) -> str:
    return f"fga:generation:{store_id}"


class GatedFgaStore:
    """One store's view that announces its writes (:class:`Generations`); reads as
    ``inner``. The engine asks :meth:`generation` before its SQL refresh."""

    def __init__(self, inner: FgaStore, generations: Generations, store_id: str) -> None:
        self.inner = inner
        self.generations = generations
        self.store_id = store_id
        self.backend = inner.backend

    def generation_ahead(self) -> CommandAhead:
        return self.generations.read_ahead(self.store_id)

    async def generation(self, ahead: CommandAhead | None = None) -> bytes | None:
        return await self.generations.read(self.store_id, ahead)

    async def revision(self) -> int:
        return await self.inner.revision()

    async def changes_since(self, revision: int) -> list[Change] | None:
        return await self.inner.changes_since(revision)

    async def head(self) -> Head:
        return await self.inner.head()

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        return await self.inner.fetch(reads)

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        return await self.inner.read_tuples(where, page_size, token)

    async def write_model(self, model: StoredModel) -> int:
        write_id = await self.generations.begin(self.store_id)
        revision = await self.inner.write_model(model)
        await self.generations.end(self.store_id, write_id)
        return revision

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = _NO_OPTIONS,
    ) -> int:
        write_id = await self.generations.begin(self.store_id)
        try:
            revision = await self.inner.write_tuples(writes, deletes, options)
        except TupleConflict:
            # Refused before anything was written, rolled back: over at once.
            await self.generations.end(self.store_id, write_id)
            raise
        await self.generations.end(self.store_id, write_id)
        return revision

    async def reset(self) -> int:
        write_id = await self.generations.begin(self.store_id)
        try:
            revision = await self.inner.reset()
        except StoreNotEmpty:
            await self.generations.end(self.store_id, write_id)
            raise
        await self.generations.end(self.store_id, write_id)
        return revision
