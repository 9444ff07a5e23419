"""Fair shares of one listening socket among ``--workers`` processes.

Every worker waits on the same inherited socket and the kernel gives a new connection to
whichever accepts first, and a worker that wakes first takes what is in the backlog: 16
keep-alive connections opened at once landed 6/10, 8/8, 7/9 and 5/11 on two workers in
four tries, and the busier worker's callers queued behind each other. Here each worker
publishes how many connections it holds in a small file shared by all (one 8-byte slot
each, written only by its owner) and, while it holds more than another live worker, lets
the others accept first: for at most :data:`YIELD_LIMIT`, so a worker that is alive but
slow to accept never leaves a connection waiting longer than that.

A slot of -1 is a worker that is not running (not started yet, or died): it is not
counted, so the others take everything until it is back.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import trio

__all__ = ["ABSENT", "YIELD_LIMIT", "AcceptShares", "WorkerShare", "over_share"]

#: A slot's value while its worker is not running.
ABSENT = -1
#: How long a worker over its share waits for the others to accept before it does.
YIELD_LIMIT = 0.05
_YIELD_STEPS = 20
_SLOT = 8


def over_share(counts: list[int], index: int) -> bool:
    """Whether worker ``index`` holds more connections than the least loaded live worker
    (``counts``: every worker's, :data:`ABSENT` for one not running): then that one
    should take the next."""
    mine = counts[index]
    if mine == ABSENT:
        return False
    return any(mine > count != ABSENT for count in counts)


class AcceptShares:
    """The shared file of connection counts, as one worker (or the parent) sees it."""

    def __init__(self, path: Path, workers: int) -> None:
        with path.open("r+b") as file:
            self._map = mmap.mmap(file.fileno(), workers * _SLOT)
        self._slots = memoryview(self._map).cast("q")
        self.workers = workers

    @staticmethod
    def create(path: Path, workers: int) -> None:
        """The file for ``workers`` workers, every one absent (the parent, before any)."""
        path.write_bytes(ABSENT.to_bytes(_SLOT, "little", signed=True) * workers)

    def publish(self, index: int, count: int) -> None:
        self._slots[index] = count

    def counts(self) -> list[int]:
        return list(self._slots)


class WorkerShare:
    """One worker's slot: what its HTTP server publishes and consults."""

    def __init__(self, shares: AcceptShares, index: int) -> None:
        self.shares = shares
        self.index = index

    def publish(self, count: int) -> None:
        self.shares.publish(self.index, count)

    def leave(self) -> None:
        """This worker takes no more connections (it is stopping): not counted from now."""
        self.shares.publish(self.index, ABSENT)

    async def take_turn(self) -> None:
        """Return when this worker should accept: at once while within its share, else
        once the others caught up or :data:`YIELD_LIMIT` passed."""
        # Polled: the others' counts change in other processes, nothing here can wake us.
        for _ in range(_YIELD_STEPS):
            if not over_share(self.shares.counts(), self.index):
                return
            await trio.sleep(YIELD_LIMIT / _YIELD_STEPS)
