"""The outbox worker: carries out deferred work (mail, webhooks) until it succeeds.

One background trio task per server process. It claims due items under a lease, runs
the handler registered for each item's kind with a timeout, and then deletes the item,
or reschedules it with exponential backoff (with jitter, capped), or after
``max_attempts`` marks it failed. Items survive restarts because they live in SQL; an
item whose worker died mid-run comes back when its lease lapses. Handlers must therefore
be idempotent or tell the receiver how to deduplicate (webhooks carry the item id).

Leases are short (``OutboxPolicy.lease``, a few seconds) and renewed every half lease while
the batch runs, so a crashed worker's items are retried within seconds, never while a live
worker is still running them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from bastion.service import tracing
from bastion.storage import outbox
from bastion.storage.outbox import OutboxItem
from bastion.storage.sql.database import Database

log = logging.getLogger("bastion.outbox")

Handler = Callable[[OutboxItem], Awaitable[None]]


class PermanentFailure(Exception):
    """The handler knows retrying cannot help (e.g. a refused target): give up now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxPolicy:
    max_attempts: int = 8
    backoff_base: float = 2.0
    backoff_max: float = 600.0
    handler_timeout: float = 30.0
    #: seconds an item stays claimed without its worker renewing the lease
    lease: float = 5.0
    poll_interval: float = 1.0
    batch: int = 20

    def backoff(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1``: 2, 4, 8 ... capped, with +-20% jitter."""
        delay = min(self.backoff_max, self.backoff_base**attempts)
        return delay * random.uniform(0.8, 1.2)  # noqa: S311 (jitter, not a secret)


class OutboxWorker:
    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, Handler],
        policy: OutboxPolicy | None = None,
    ) -> None:
        self._db = db
        self._handlers = dict(handlers)
        self.policy = policy or OutboxPolicy()
        self._wake = trio.Event()
        # Items enqueued by this process are run at once; the poll finds everyone else's.
        db.on_commit(outbox.ENQUEUED, self.wake)
        self.delivered = 0
        self.retried = 0
        self.failed = 0
        #: items settled, by (kind, outcome): outcome is delivered, retried or failed
        self.settled: Counter[tuple[str, str]] = Counter()
        #: items waiting and the age in seconds of the oldest, as last measured
        self.backlog: tuple[int, float] = (0, 0.0)
        self._measured_at = 0.0

    def wake(self) -> None:
        """Look for work now rather than at the next poll (called after an enqueue commits)."""
        self._wake.set()

    def statistics(self) -> dict[str, int]:
        return {"delivered": self.delivered, "retried": self.retried, "failed": self.failed}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                worked = await self.run_once()
            except Exception:
                log.warning("outbox poll failed", exc_info=True)
                worked = 0
            with contextlib.suppress(Exception):  # a measure never stops the work
                await self._measure()
            if worked:
                continue
            with trio.move_on_after(self.policy.poll_interval):
                await self._wake.wait()
            self._wake = trio.Event()

    async def _measure(self) -> None:
        """The backlog for ``bastion_outbox_*`` gauges, at most once per poll interval."""
        now = time.time()
        if now - self._measured_at < self.policy.poll_interval:
            return
        self._measured_at = now
        count, oldest = await self._db.run(outbox.backlog)
        self.backlog = (count, 0.0 if oldest is None else max(0.0, now - oldest))

    async def run_once(self) -> int:
        """Claim and run one batch of due items; how many were claimed."""
        lease = self.policy.lease
        items = await self._db.run(
            lambda c: outbox.claim(c, now=time.time(), lease=lease, limit=self.policy.batch),
            write=True,
        )
        if not items:
            return 0
        running = {item.id for item in items}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew_leases, running)
            async with trio.open_nursery() as batch:
                for item in items:
                    batch.start_soon(self._run_item, item, running)
            nursery.cancel_scope.cancel()
        return len(items)

    async def _renew_leases(self, running: set[str]) -> None:
        """Every half lease, extend the leases of the batch's items still running."""
        while True:
            await trio.sleep(self.policy.lease / 2)
            ids = sorted(running)
            if not ids:
                continue
            now = time.time()
            renew = partial(outbox.renew, item_ids=ids, now=now, until=now + self.policy.lease)
            try:
                await self._db.run(renew, write=True)
            except Exception:
                log.warning("outbox lease renewal failed", exc_info=True)

    async def _run_item(self, item: OutboxItem, running: set[str]) -> None:
        handler = self._handlers.get(item.kind)
        error: str | None = None
        permanent = False
        if handler is None:
            error, permanent = f"no handler for {item.kind!r}", True
        else:
            facts = {"outbox.item": item.id, "outbox.attempt": item.attempts}
            with tracing.span(f"outbox {item.kind}", facts, new_trace=True) as span:
                try:
                    with trio.fail_after(self.policy.handler_timeout):
                        await handler(item)
                except trio.TooSlowError:
                    error = f"timed out after {self.policy.handler_timeout:g}s"
                except PermanentFailure as exc:
                    error, permanent = str(exc) or type(exc).__name__, True
                except Exception as exc:
                    error = f"{type(exc).__name__}: {exc}"
                if error is not None and span is not None:
                    tracing.mark_failed(span, error)
        running.discard(item.id)
        await self._settle(item, error, permanent)

    async def _settle(self, item: OutboxItem, error: str | None, permanent: bool) -> None:
        now = time.time()
        extra: dict[str, Any] = {"item": item.id, "kind": item.kind, "attempt": item.attempts}
        if error is None:
            await self._db.run(lambda c: outbox.complete(c, item.id), write=True)
            self.delivered += 1
            self.settled[item.kind, "delivered"] += 1
            return
        if permanent or item.attempts >= self.policy.max_attempts:
            await self._db.run(lambda c: outbox.fail(c, item.id, now=now, error=error), write=True)
            self.failed += 1
            self.settled[item.kind, "failed"] += 1
            log.error("outbox item failed for good", extra={**extra, "error": error})
            return
        at = now + self.policy.backoff(item.attempts)
        await self._db.run(lambda c: outbox.reschedule(c, item.id, at=at, error=error), write=True)
        self.retried += 1
        self.settled[item.kind, "retried"] += 1
        log.warning("outbox item will be retried", extra={**extra, "error": error})
