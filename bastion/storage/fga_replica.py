"""The authorization engine's reads from a read replica (``--database-replica-url``).

Only what the engine reads goes there: the store's revision, the changelog past a
revision, the head and the tuple reads of an evaluation (:meth:`FgaStore.revision`,
``changes_since``, ``head``, ``fetch``).
Writes, Read (``read_tuples``: a caller reads what it just wrote) and everything of
OpenFGA's ``/stores`` registry stay on the primary.

Rules:

- **Never backwards.** Each store keeps a *floor*: the highest revision this process has
  written or seen (on either server). A replica answer below the floor (the replica has
  not replayed this process's own write yet, or a revision a caller asked to reach) is
  dropped and the primary answers instead, so a check right after a write in the same
  process sees that write, and the engine's index never goes back in time.
- **Higher consistency.** :meth:`ReplicatedFgaStore.reach_primary` reads the primary's
  revision into the floor: the refresh that follows is as fresh as the primary (OpenFGA's
  ``consistency: HIGHER_CONSISTENCY``).
- **Staleness.** Otherwise an answer may miss a write made through *another* process for
  as long as the replica lags behind the primary (its replay delay; on PostgreSQL
  ``now() - pg_last_xact_replay_timestamp()`` on the replica).
- **A replica that fails** (unreachable, too slow, a query cancelled by a recovery
  conflict) is not an outage: the primary answers, ``unavailable`` is counted, one log
  line says the replica is down, and for :data:`RETRY_AFTER` seconds every read goes to
  the primary before the replica is tried again (one more line when it is back).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import sqlalchemy as sa
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
    TupleFilter,
    TuplePage,
    WriteOptions,
)
from bastion.storage.sql.database import Database

__all__ = ["RETRY_AFTER", "ReplicaReads", "ReplicatedFgaStore"]

log = logging.getLogger("bastion.storage.replica")

T = TypeVar("T")

#: Seconds a failed replica is left alone (every read on the primary) before a new try.
RETRY_AFTER = 5.0
#: Why a read went where it went: the ``outcome`` label of the reads metric.
OUTCOMES = ("replica", "behind", "unavailable")
_NO_OPTIONS = WriteOptions()


class ReplicaReads:
    """The replica database, shared by every store's view: its health and the counters."""

    def __init__(self, db: Database, clock: Callable[[], float] = trio.current_time) -> None:
        self.db = db
        self._clock = clock
        #: Reads per outcome: ``replica`` (answered there), ``behind`` (the replica had not
        #: reached the floor: the primary answered), ``unavailable`` (the replica failed or
        #: is resting after a failure: the primary answered).
        self.reads = dict.fromkeys(OUTCOMES, 0)
        self._down_until: float | None = None

    @property
    def up(self) -> bool:
        """False from a failure until the replica answers again."""
        return self._down_until is None

    def statistics(self) -> dict[str, int]:
        return {**self.reads, "up": int(self.up)}

    def resting(self) -> bool:
        return self._down_until is not None and self._clock() < self._down_until

    def failed(self, error: BaseException) -> None:
        if self._down_until is None:
            log.warning(
                "read replica unavailable: the authorization engine reads the primary",
                extra={"error": " ".join(str(error).split())[:300]},
            )
        self._down_until = self._clock() + RETRY_AFTER

    def answered(self) -> None:
        if self._down_until is not None:
            log.warning("read replica back: the authorization engine reads it again")
            self._down_until = None

    async def probe(self) -> bool:
        """Ping the replica (``/readyz``); its health follows the answer. Never raises."""
        try:
            await self.db.ping()
        except StorageUnavailable as exc:
            self.failed(exc)
            return False
        self.answered()
        return True


class ReplicatedFgaStore:
    """One store's view: the engine's follow reads on the replica, all else on the primary."""

    def __init__(self, primary: FgaStore, replica: FgaStore, reads: ReplicaReads) -> None:
        self.primary = primary
        self.replica = replica
        self.reads = reads
        self.backend = primary.backend
        #: The highest revision this process wrote or saw: no answer goes below it.
        self.floor = 0

    def _seen(self, revision: int) -> int:
        self.floor = max(self.floor, revision)
        return revision

    async def _from_replica(
        self,
        read: Callable[[FgaStore], Awaitable[T]],
        reached: Callable[[T], bool],
    ) -> T:
        """``read`` on the replica if it is up and its answer reaches the floor, else on
        the primary."""
        if not self.reads.resting():
            try:
                found = await read(self.replica)
            except (StorageUnavailable, sa.exc.DBAPIError) as exc:
                self.reads.failed(exc)
            else:
                self.reads.answered()
                if reached(found):
                    self.reads.reads["replica"] += 1
                    return found
                self.reads.reads["behind"] += 1
                return await read(self.primary)
        self.reads.reads["unavailable"] += 1
        return await read(self.primary)

    async def reach_primary(self) -> None:
        """Raise the floor to the primary's revision: the next refresh is that fresh."""
        self._seen(await self.primary.revision())

    async def revision(self) -> int:
        floor = self.floor
        found = await self._from_replica(lambda s: s.revision(), lambda r: r >= floor)
        return self._seen(found)

    async def changes_since(self, revision: int) -> list[Change] | None:
        floor = self.floor

        def reached(changes: list[Change] | None) -> bool:
            # None: only the head will do, which is read (and checked) on its own.
            return changes is None or (changes[-1].revision if changes else revision) >= floor

        changes = await self._from_replica(lambda s: s.changes_since(revision), reached)
        if changes:
            self._seen(changes[-1].revision)
        return changes

    async def head(self) -> Head:
        floor = self.floor
        found = await self._from_replica(lambda s: s.head(), lambda h: h.revision >= floor)
        self._seen(found.revision)
        return found

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        """Answers at least as recent as everything this process has seen: the replica's
        when it has reached the floor (the engine's cached state is never newer)."""
        floor = self.floor
        found = await self._from_replica(lambda s: s.fetch(reads), lambda f: f.revision >= floor)
        self._seen(found.revision)
        return found

    async def write_model(self, model: StoredModel) -> int:
        return self._seen(await self.primary.write_model(model))

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = _NO_OPTIONS,
    ) -> int:
        return self._seen(await self.primary.write_tuples(writes, deletes, options))

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        return await self.primary.read_tuples(where, page_size, token)

    async def reset(self) -> int:
        return self._seen(await self.primary.reset())
