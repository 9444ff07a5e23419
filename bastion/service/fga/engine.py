"""This process's view of the authorization store: read on demand, cached, kept exact.

The evaluator reads tuples through a reader; here each evaluation runs in rounds
(:mod:`core.fga.on_demand`): a round answers from the request's answers and the process's
:class:`~core.fga.on_demand.ReadCache` (bounded in bytes, ``--fga-cache-mib``, shared by
every store of the process), and the reads it missed are fetched from the store together
(:meth:`FgaStore.fetch`, one batch of indexed queries) before the next round. Nothing is
loaded at start-up but the store's head (its revision and latest model), and memory does
not grow with the store.

Consistency contract: before each request is answered, :meth:`EngineState.fresh` reads
the store's revision (one indexed ``max``). When it moved, the changelog rows past the
revision this process last saw are replayed: a tuple written or deleted discards the
cached reads it changes (:func:`~core.fga.on_demand.keys_touched`), a model is installed.
After a reset, or far behind, the store's cached reads are dropped at once (a new
*scope* names the store's entries; the old ones age out) and the head is read again. A
fetch answers at least as of the request's arrival, and its answers are cached only if
no change was replayed while it ran (one could have discarded a key the fetch read just
before it). So a tuple or a model written through any instance is used by the next
request on every other instance that shares the store; there is no time-based staleness.

With Redis as the memory store the revision is read only when it may have moved: the
store's *generation* there (:mod:`storage.fga_generation`, one Redis call, no worker
thread) is read first, and when it is the one this process last refreshed under, nothing
was written since that refresh began, so the SQL read is skipped. A generation Redis
cannot give (unreachable, a write in progress) means the SQL read, as does ``consistent``.

With a read replica (``--database-replica-url``) the revision, changelog, head and reads
are read there (:mod:`storage.fga_replica`): a write through another process is then seen
once the replica has replayed it (its replication lag is the staleness bound); this
process's own writes, and any request asking for ``consistent`` (OpenFGA's
``HIGHER_CONSISTENCY``), are seen at once, read from the primary if the replica lags.
The generation does not gate those reads: it tells that the primary moved, not whether
the replica has caught up.

Requests arriving together share one refresh (single flight), but a request is only
ever answered from a refresh that *started* after it arrived, so the guarantee above
holds for it. Check results are cached per (scope, model id, revision): a write makes
older entries unreachable.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar, cast

import trio

from bastion.core.fga.cache import CheckCache
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.on_demand import (
    OBJECT_LIMIT,
    ObjectTuples,
    ReadCache,
    ReadKey,
    RoundReader,
    Speculation,
    as_answer,
    keys_touched,
    whole_object,
)
from bastion.core.fga.tuples import TupleKey
from bastion.core.fga.typesystem import TypeSystem
from bastion.service.fga.untracked import untrack_answer
from bastion.storage.fga import Change, FgaStore, Read, StoredModel, TupleFilter
from bastion.storage.fga_generation import GatedFgaStore
from bastion.storage.fga_replica import ReplicatedFgaStore
from bastion.storage.memory.redis_topology import CommandAhead

__all__ = ["DEFAULT_CACHE_MIB", "ActiveModel", "EngineCaches", "EngineState", "Offload"]

T = TypeVar("T")

#: ``--fga-cache-mib``'s default: the read cache of every store of a process, together.
DEFAULT_CACHE_MIB = 512
#: Check sub-problems kept across requests, every store together.
CHECK_CACHE_ENTRIES = 100_000
#: A store is preloaded when its revision times this fits in half the read cache (an
#: object read whole is ~2 KiB held for 3 tuples, estimated ~3.2 KiB: this is per tuple).
PRELOAD_BYTES = 1_100
#: Tuples per page of a preload.
PRELOAD_PAGE = 5_000
#: Runs one round of an evaluation (a worker thread's ``to_thread.run_sync``, say).
Offload = Callable[[Callable[[], list[ReadKey]]], Awaitable[list[ReadKey]]]
#: Names of a store's cached state in the shared caches, never reused in a process.
_SCOPES = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ActiveModel:
    id: str
    dsl: str
    ts: TypeSystem
    graph: ReverseGraph

    @classmethod
    def load(cls, stored: StoredModel) -> ActiveModel:
        ts = TypeSystem(parse_model(stored.dsl))
        return cls(stored.id, stored.dsl, ts, ReverseGraph.build(ts))


@dataclass(frozen=True, slots=True)
class EngineCaches:
    """What the engines of every store of this process share, bounded together."""

    reads: ReadCache
    checks: CheckCache

    @classmethod
    def sized(cls, mib: int = DEFAULT_CACHE_MIB) -> EngineCaches:
        return cls(ReadCache(mib * 1024 * 1024), CheckCache(CHECK_CACHE_ENTRIES))


class EngineState:
    def __init__(self, store: FgaStore, caches: EngineCaches | None = None) -> None:
        self.store = store
        self.caches = EngineCaches.sized() if caches is None else caches
        self.cache = self.caches.checks
        self.model: ActiveModel | None = None
        #: The store revision the cached state reflects; -1 before the first refresh.
        self.revision = -1
        #: This store's cached state in the shared caches (a new one drops it all).
        self.scope = next(_SCOPES)
        #: Counts the changes applied: a fetch that saw it move is not cached.
        self._stamp = 0
        self.restarts = 0
        self.changes_replayed = 0
        self.fetches = 0
        self._arrivals = 0
        self._covered = 0
        self._refreshing: trio.Event | None = None
        #: Redis's generation of the store when the last completed refresh began.
        self._generation: bytes | None = None
        #: A ``consistent`` call waits: the next refresh reads SQL whatever the generation.
        self._probe = False

    @property
    def cache_scope(self) -> str:
        """The check cache's scope: this store's cached state, model and revision, as one
        string (its hash is computed once, not at every lookup as a tuple's would be)."""
        model = "" if self.model is None else self.model.id
        return f"{self.scope}:{model}:{self.revision}"

    async def evaluate(self, run: Callable[[RoundReader], T], offload: Offload | None = None) -> T:
        """``run(reader)`` over the store as of (at least) the last :meth:`fresh`: in
        rounds, the reads each round missed fetched together (see the module docstring).
        ``run`` may be called several times; only the last call's result counts, so it
        must not act on the world (count metrics, stream) but return what it found.

        ``offload``: runs each round elsewhere (a worker thread, for a long evaluation);
        the round then reads the shared cache without touching its use order
        (:meth:`ReadCache.peek`), and the fetches stay here."""
        reads_cache = self.caches.reads
        known = reads_cache.get if offload is None else reads_cache.peek
        speculation = Speculation(run, known, self.scope, OBJECT_LIMIT)
        while reads := (speculation.step() if offload is None else await offload(speculation.step)):
            await self._fetch(reads, speculation)
        return speculation.result

    async def preload(self) -> int:
        """Read the store into the read cache, every object whole, if it fits in half the
        cache: a process that has just started then answers as warm. Called once after
        the first :meth:`fresh`. Returns the objects cached: 0 when the store is too
        large (it stays on demand) or a change was replayed meanwhile (the pages were
        read at different moments: then nothing is kept, as a fetch that saw a change).
        """
        reads = self.caches.reads
        budget = reads.max_bytes // 2
        if self.model is None or self.revision * PRELOAD_BYTES > budget:
            return 0
        scope, stamp = self.scope, self._stamp
        by_object: dict[str, list[TupleKey]] = {}
        token, count = "", 0
        while True:
            page = await self.store.read_tuples(TupleFilter(), PRELOAD_PAGE, token)
            for found in page.tuples:
                by_object.setdefault(found.object, []).append(found)
            count += len(page.tuples)
            token = page.continuation_token
            if not token or count * PRELOAD_BYTES > budget:
                break
        if token or scope != self.scope or stamp != self._stamp:
            return 0
        put = 0
        for obj, tuples in by_object.items():
            read = whole_object(scope, obj, OBJECT_LIMIT)
            if reads.peek(read) is None:  # a request's fetch may be newer
                answer = ObjectTuples(tuples[: OBJECT_LIMIT + 1])
                untrack_answer(answer)
                reads.put(read, answer)
                put += 1
        return put

    async def _fetch(self, keys: Sequence[ReadKey], speculation: Speculation[T]) -> None:
        stamp = self._stamp
        fetched = await self.store.fetch([_store_read(key) for key in keys])
        self.fetches += 1
        keep = stamp == self._stamp
        reads = self.caches.reads
        for key, fetched_answer in zip(keys, fetched.answers, strict=True):
            answer = as_answer(key, fetched_answer)
            untrack_answer(answer)
            speculation.answer(key, answer)
            if keep:
                reads.put(key, answer)

    @contextmanager
    def generation_ahead(self) -> Iterator[CommandAhead | None]:
        """The store's generation read, put on board this task's next Redis request (the
        caller's authentication, say) for :meth:`fresh`; ``None`` where there is no
        generation to read or no refresh to compare it with yet."""
        if not isinstance(self.store, GatedFgaStore) or self._generation is None:
            yield None
            return
        ahead = self.store.generation_ahead()
        try:
            yield ahead
        finally:
            ahead.drop()

    async def fresh(self, *, consistent: bool = False, ahead: CommandAhead | None = None) -> None:
        """Return once the index reflects the store as of (at least) this call.

        With a read replica, "the store" is the replica, never behind this process's own
        writes; ``consistent`` (OpenFGA's ``HIGHER_CONSISTENCY``) makes it the primary.

        ``ahead`` (:meth:`generation_ahead`, read after this call's request arrived):
        when it is the generation the last completed refresh began under, nothing was
        committed between that refresh's start and the read, so the index already holds
        every write committed before the request arrived, and the call returns at once.
        Otherwise the call goes the usual way.
        """
        if ahead is not None and not consistent and isinstance(self.store, GatedFgaStore):
            generation = await self.store.generation(ahead)
            if generation is not None and generation == self._generation:
                return
        if consistent:
            if isinstance(self.store, ReplicatedFgaStore):
                # Before the ticket: the refresh that covers this call starts after it.
                await self.store.reach_primary()
            self._probe = True
        ticket = self._arrivals
        self._arrivals += 1
        while self._covered <= ticket:
            if self._refreshing is not None:
                await self._refreshing.wait()
                continue
            covers = self._arrivals
            done = self._refreshing = trio.Event()
            try:
                await self._refresh()
                self._covered = max(self._covered, covers)
            finally:
                self._refreshing = None
                done.set()

    async def _refresh(self) -> None:
        probe, self._probe = self._probe, False
        # Read BEFORE the SQL refresh it authorises (see storage.fga_generation).
        generation = (
            await self.store.generation() if isinstance(self.store, GatedFgaStore) else None
        )
        if generation is not None and generation == self._generation and not probe:
            return
        await self._follow()
        self._generation = generation

    async def _follow(self) -> None:
        revision = await self.store.revision()
        if revision == self.revision:
            return
        changes = None if self.revision < 0 else await self.store.changes_since(self.revision)
        if changes is None:
            await self._restart()
            return
        for change in changes:
            self._apply(change)
        if changes:
            self.revision = changes[-1].revision

    async def _restart(self) -> None:
        """Start over from the store's head: no cached read of the old state is used."""
        head = await self.store.head()
        self._forget()
        if head.model is None:
            self.model = None
        elif self.model is None or self.model.id != head.model.id:
            self.model = ActiveModel.load(head.model)
        self.revision = head.revision
        self.restarts += 1

    def _forget(self) -> None:
        self.scope = next(_SCOPES)
        self._stamp += 1

    def _apply(self, change: Change) -> None:
        self.changes_replayed += 1
        if change.operation in ("write", "delete") and change.key is not None:
            discard = self.caches.reads.discard
            for key in keys_touched(self.scope, change.key, OBJECT_LIMIT):
                discard(key)
            self._stamp += 1
        elif change.operation == "model" and change.model is not None:
            self.model = ActiveModel.load(change.model)
        elif change.operation == "reset":
            self._forget()
            self.model = None


def _store_read(key: ReadKey) -> Read:
    """A cache key without its scope: the store's question (its parts text: a whole
    object's limit is an int)."""
    if key[1] == "read_object":
        return tuple(str(part) for part in key[1:])
    return cast(Read, key[1:])
