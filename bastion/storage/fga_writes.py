"""Concurrent tuple writes of one process, committed together (group commit).

Every write of the authorization store takes the writers' lock and commits
(:mod:`storage.fga`); with several callers at once, each waited for the lock, then for
its own commit (a WAL flush on PostgreSQL), one after the other. Here the writes that
arrive while one is in progress queue up, and when it ends the next caller takes every
queued write into ONE locked transaction: one lock wait, one revision read per write,
one commit for them all.

Each write stays all or nothing on its own: it runs in a savepoint when it has deletes and
writes (its conflict, found after its deletes, undoes them alone), and a conflict fails
that write only (:class:`~storage.fga.TupleConflict`, raised to its caller); the others of
the group commit. A failure of the transaction itself (the database unreachable, a
timeout) fails every write of the group, none of which is then written. Revisions are
taken in queue order, each write's answer is its own last revision, and the group becomes
visible at one commit, so readers see whole writes only, as before.

The transaction runs shielded from the callers' cancellation (each statement is bounded by
the database timeout): a caller gone meanwhile must not fail the others. A caller
cancelled while its write is still queued takes it out of the queue, unwritten.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
import trio

from bastion.storage.sql.database import Database

__all__ = ["WriteQueue", "queue_for"]


@dataclass(eq=False, slots=True)
class _Write:
    work: Callable[[sa.Connection], int]
    savepoint: bool
    own_errors: tuple[type[Exception], ...]
    #: What it returned, or what failed it; set once its group ended.
    result: int | None = None
    error: BaseException | None = None
    done: bool = False


class WriteQueue:
    """The queue of one database's tuple writes in this process (:func:`queue_for`)."""

    def __init__(self, db: Database, lock_key: str) -> None:
        self._db = db
        self._lock_key = lock_key
        self._queued: list[_Write] = []
        self._busy = False
        self._round_over = trio.Event()
        #: Groups committed and writes in them, for the benchmarks and tests.
        self.groups = 0
        self.writes = 0

    async def run(
        self,
        work: Callable[[sa.Connection], int],
        *,
        savepoint: bool,
        own_errors: tuple[type[Exception], ...],
    ) -> int:
        """``work(conn)``'s answer, run in a locked transaction with the other writes
        queued meanwhile. ``own_errors``: what ``work`` raises to fail itself alone
        (before it wrote anything, or with ``savepoint``, which undoes what it wrote)."""
        mine = _Write(work, savepoint, own_errors)
        self._queued.append(mine)
        while not mine.done:
            if self._busy:
                try:
                    await self._round_over.wait()
                except trio.Cancelled:
                    if mine in self._queued:  # not taken yet: never written
                        self._queued.remove(mine)
                    raise
                continue
            await self._run_group()
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    async def _run_group(self) -> None:
        group, self._queued = self._queued, []
        self._busy = True
        try:
            with trio.CancelScope(shield=True):
                await self._db.run_locked(self._lock_key, lambda conn: _run_group(group, conn))
            self.groups += 1
            self.writes += len(group)
        except BaseException as exc:  # the transaction failed: every write of it
            for write in group:
                if not write.done:
                    write.error, write.result = exc, None
            if not isinstance(exc, Exception):
                raise
        finally:
            for write in group:
                write.done = True
            self._busy = False
            over, self._round_over = self._round_over, trio.Event()
            over.set()


def _run_group(group: list[_Write], conn: sa.Connection) -> None:
    for write in group:
        savepoint = conn.begin_nested() if write.savepoint else None
        try:
            write.result = write.work(conn)
        except write.own_errors as exc:
            if savepoint is not None:
                savepoint.rollback()
            write.error = exc
            continue
        if savepoint is not None:
            savepoint.commit()


_QUEUES: weakref.WeakKeyDictionary[Database, WriteQueue] = weakref.WeakKeyDictionary()


def queue_for(db: Database, lock_key: str) -> WriteQueue:
    """The one queue of ``db``'s writes under ``lock_key`` in this process."""
    queue = _QUEUES.get(db)
    if queue is None:
        queue = _QUEUES[db] = WriteQueue(db, lock_key)
    return queue
