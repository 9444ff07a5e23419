"""This process's view of the authorization store, kept exact at the cost of one cheap query.

The evaluator never reads storage: it reads a :class:`~core.fga.tuples.MemoryTupleReader`
holding every tuple, kept per server process. Consistency contract: before each request
is answered, :meth:`EngineState.fresh` reads the store's revision (one indexed ``max``).
When it moved, the changelog rows past the revision this process last saw are replayed
into the index (or, after a reset or far behind, a snapshot is reloaded). So a tuple or a
model written through any instance is used by the next request on every other instance
that shares the store; there is no time-based staleness.

With Redis as the memory store the revision is read only when it may have moved: the
store's *generation* there (:mod:`storage.fga_generation`, one Redis call, no worker
thread) is read first, and when it is the one this process last refreshed under, nothing
was written since that refresh began, so the SQL read is skipped. A generation Redis
cannot give (unreachable, a write in progress) means the SQL read, as does ``consistent``.

With a read replica (``--database-replica-url``) the revision, changelog and snapshot are
read there (:mod:`storage.fga_replica`): a write through another process is then seen
once the replica has replayed it (its replication lag is the staleness bound); this
process's own writes, and any request asking for ``consistent`` (OpenFGA's
``HIGHER_CONSISTENCY``), are seen at once, read from the primary if the replica lags.
The generation does not gate those reads: it tells that the primary moved, not whether
the replica has caught up.

Requests arriving together share one refresh (single flight), but a request is only
ever answered from a refresh that *started* after it arrived, so the guarantee above
holds for it. Check results are cached per (model id, revision): a write makes older
entries unreachable.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import trio

from bastion.core.fga.cache import CheckCache
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem
from bastion.storage.fga import Change, FgaStore, StoredModel
from bastion.storage.fga_generation import GatedFgaStore
from bastion.storage.fga_replica import ReplicatedFgaStore
from bastion.storage.memory.redis_topology import CommandAhead

__all__ = ["ActiveModel", "EngineState"]


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


def _build_index(tuples: list[TupleKey]) -> MemoryTupleReader:
    return MemoryTupleReader(tuples)


class EngineState:
    def __init__(self, store: FgaStore, *, cache_entries: int = 100_000) -> None:
        self.store = store
        self.index = MemoryTupleReader()
        self.model: ActiveModel | None = None
        #: The store revision the index reflects; -1 before the first load.
        self.revision = -1
        self.cache = CheckCache(cache_entries)
        self.snapshots_loaded = 0
        self.changes_replayed = 0
        self._arrivals = 0
        self._covered = 0
        self._refreshing: trio.Event | None = None
        #: Redis's generation of the store when the last completed refresh began.
        self._generation: bytes | None = None
        #: A ``consistent`` call waits: the next refresh reads SQL whatever the generation.
        self._probe = False

    @property
    def cache_scope(self) -> tuple[str, int]:
        return ("" if self.model is None else self.model.id, self.revision)

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
            await self._load_snapshot()
            return
        for change in changes:
            self._apply(change)
        if changes:
            self.revision = changes[-1].revision

    async def _load_snapshot(self) -> None:
        snapshot = await self.store.snapshot()
        self.index = await trio.to_thread.run_sync(_build_index, list(snapshot.tuples))
        self.model = None if snapshot.model is None else ActiveModel.load(snapshot.model)
        self.revision = snapshot.revision
        # The index lives until the next snapshot: out of the cyclic collector's sight, a
        # full collection does not walk it (445 ms a collection with 200,000 tuples, every
        # request of the process paused meanwhile). Its objects are still freed by their
        # reference counts when a later snapshot replaces it (tuples and strings, no cycles).
        gc.freeze()
        self.snapshots_loaded += 1

    def _apply(self, change: Change) -> None:
        self.changes_replayed += 1
        if change.operation == "write" and change.key is not None:
            self.index.write(change.key)
        elif change.operation == "delete" and change.key is not None:
            self.index.delete(change.key)
        elif change.operation == "model" and change.model is not None:
            self.model = ActiveModel.load(change.model)
        elif change.operation == "reset":
            self.index = MemoryTupleReader()
            self.model = None
