"""Which events some enabled webhook listens for, as this process last read it.

Every flow asks before it queues an event. Asking the webhook table inside each login's
transaction cost one query per request, for an answer that changes only when an admin
edits webhooks. So each process keeps the answer for at most :data:`MAX_AGE` seconds, and
drops it at once when it edits webhooks itself. The outbox's fan-out reads the table again,
so a stale "yes" costs one queued item that delivers nothing; a stale "no" (a webhook
added or enabled through another instance less than :data:`MAX_AGE` seconds ago) misses
this instance's events of that moment. The README's consistency contract says so.
"""

from __future__ import annotations

import trio

from bastion.storage import webhooks
from bastion.storage.sql.database import Database

__all__ = ["MAX_AGE", "WebhookListeners"]

#: Seconds an answer read from the webhook table is used for.
MAX_AGE = 1.0


class WebhookListeners:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._names: frozenset[str] | None = None
        self._read_at = 0.0
        #: bumped by :meth:`forget`: a read that overlapped an edit is not kept
        self._edits = 0
        self._lock = trio.Lock()

    async def listening(self, event_name: str) -> bool:
        """Does some enabled webhook listen for ``event_name``?"""
        return event_name in await self._current()

    def forget(self) -> None:
        """This process changed the webhooks: the next question reads the table."""
        self._names = None
        self._edits += 1

    async def _current(self) -> frozenset[str]:
        fresh = self._fresh()
        if fresh is not None:
            return fresh
        async with self._lock:  # one read for everyone who found the answer stale
            fresh = self._fresh()
            if fresh is not None:
                return fresh
            edits, started = self._edits, trio.current_time()
            names = await self._db.read(webhooks.enabled_event_names)
            if edits == self._edits:
                self._names, self._read_at = names, started
            return names

    def _fresh(self) -> frozenset[str] | None:
        if self._names is not None and trio.current_time() - self._read_at < MAX_AGE:
            return self._names
        return None
