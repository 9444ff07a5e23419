"""The background prune (``--prune-interval``): expired rows and logs past retention.

Every process runs it; a lease in the memory store, held for the whole round, lets one
process prune at a time. A round deletes in batches of ``--prune-batch-size`` rows, each
its own short transaction, and rests nine times as long as each batch took before the
next (at most a tenth of one connection's time and of the process's loop), so logins
and other hot paths keep their latency while millions of rows go. What a round removed is
counted in ``bastion_pruned_rows_total{table}``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from bastion.core.settings import Settings
from bastion.service.metrics import Metrics
from bastion.storage import Storage, StorageUnavailable
from bastion.storage.retention import EXPIRING, LOGS, Prunable, prune_batch

__all__ = ["Pruner"]

log = logging.getLogger("bastion.retention")

DAY_SECONDS = 86_400
LEASE_KEY = "prune:lease"
#: A round's lease outlives a process that died holding it by at most this long.
LEASE_SECONDS = 600.0
#: Rest after a batch, as a multiple of the batch's own time.
REST_FACTOR = 9.0


class Pruner:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        metrics: Metrics,
        clock: Callable[[], float],
    ) -> None:
        self._storage = storage
        self._metrics = metrics
        self._clock = clock
        self._interval = settings.prune_interval
        self._batch = settings.prune_batch_size
        kept = {"audit_logs": settings.audit_log_retention_days,
                "webhook_logs": settings.webhook_log_retention_days}  # fmt: skip
        #: (table, age in seconds past which a row goes; 0 = its own expiry time)
        self._targets: list[tuple[Prunable, float]] = [(target, 0) for target in EXPIRING]
        self._targets += [(LOGS[name], days * DAY_SECONDS) for name, days in kept.items() if days]

    async def run(self) -> None:
        """Prune every ``--prune-interval`` seconds until cancelled (never with 0)."""
        if not self._interval:
            return
        while True:
            await trio.sleep(self._interval)
            memory = self._storage.memory
            try:
                if await memory.set_if_absent(LEASE_KEY, b"1", ttl=LEASE_SECONDS):
                    try:
                        await self.prune()
                    finally:
                        await memory.delete(LEASE_KEY)
            except StorageUnavailable as exc:
                log.warning("prune skipped: storage unavailable", extra={"error": str(exc)})

    async def prune(self) -> dict[str, int]:
        """One round over every target; rows deleted per table."""
        now = self._clock()
        deleted: dict[str, int] = {}
        for target, age in self._targets:
            before = now - age
            total = 0
            while True:
                batch_started = trio.current_time()
                count = await self._storage.db.run(
                    lambda conn, t=target, b=before: prune_batch(conn, t, b, self._batch),
                    write=True,
                )
                total += count
                self._metrics.pruned_rows.labels(target.name).inc(count)
                if count < self._batch:
                    break
                await trio.sleep(REST_FACTOR * (trio.current_time() - batch_started))
            deleted[target.name] = total
        if any(deleted.values()):
            log.info("pruned", extra={"rows": deleted})
        return deleted
