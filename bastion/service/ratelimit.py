"""The per-client-IP rate limit shared by every surface and every server instance.

One token bucket per client address lives in the memory store, so N instances sharing
a database (or Redis) share the budget. Later throttles (failed logins, resends) reuse
the same store primitive under their own keys.

Leasing: asking the store on every request costs a write (with the default store, a
write transaction on the main database). So an instance takes a small lease of tokens at
once, at most a tenth of a second's refill and a quarter of the burst, and spends it
locally for at most :data:`LEASE_SECONDS`. Leased tokens have left the shared bucket, so
a lease can only make the limit stricter, never looser: tokens an instance leased and did
not use are lost (a tenth of a second's worth at the most). When the bucket no longer
holds a whole lease, requests go back to taking one token each, so one instance still
gets the whole burst. With the limits as low as a few requests per second the lease is
one token: exactly the unleased behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import trio

from bastion.core.errors import ResourceExhausted, Unavailable
from bastion.service.metrics import Metrics
from bastion.service.outages import Outage
from bastion.storage.memory.base import MemoryStore

RATE_LIMIT_MESSAGE = "Too many requests. Please try again later."
UNAVAILABLE_MESSAGE = "Rate limiting is temporarily unavailable. Please try again later."
#: Longest a leased token may wait to be spent.
LEASE_SECONDS = 1.0
#: Leases held at once; past it they are all dropped (only ever stricter).
MAX_LEASES = 100_000


def lease_size(rps: float, burst: int) -> int:
    """Tokens taken from the shared bucket at once: a tenth of a second's refill, a quarter
    of the burst at the most, one at the least."""
    return max(1, min(burst // 4, int(rps / 10)))


@dataclass(slots=True)
class _Lease:
    tokens: int
    until: float


class RateLimiter:
    def __init__(
        self,
        memory: MemoryStore,
        *,
        rps: float,
        burst: int,
        fail_closed: bool,
        metrics: Metrics,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self._memory = memory
        self._rps = rps
        self._burst = max(1, burst)
        self._fail_closed = fail_closed
        self._metrics = metrics
        self._clock = clock
        self._lease_size = lease_size(rps, self._burst)
        self._leases: dict[str, _Lease] = {}
        self._outage = Outage("memory store", "rate limits", metrics.store_failures)
        self._consequence = (
            "requests are refused with 503 (--rate-limit-fail-closed)"
            if fail_closed
            else "requests pass unlimited"
        )

    @property
    def enabled(self) -> bool:
        return self._rps > 0

    async def check(self, client_ip: str, *, surface: str) -> None:
        """Spend one token for ``client_ip`` or raise ResourceExhausted.

        A store failure lets the request through (the limit is a guard, not the
        product) unless ``--rate-limit-fail-closed`` asks for 503 instead.
        """
        if not self.enabled or self._spend_leased(client_ip):
            return
        try:
            allowed, retry_after = await self._take(client_ip)
        except Exception as exc:
            self._outage.failed(exc, self._consequence)
            if self._fail_closed:
                raise Unavailable(UNAVAILABLE_MESSAGE) from None
            return
        self._outage.answered()
        if not allowed:
            self._metrics.rate_limited.labels(surface).inc()
            raise ResourceExhausted(
                RATE_LIMIT_MESSAGE, retry_after=math.ceil(retry_after), before_effect=True
            )

    def _spend_leased(self, client_ip: str) -> bool:
        lease = self._leases.get(client_ip)
        if lease is None:
            return False
        if lease.until <= self._clock() or lease.tokens < 1:
            del self._leases[client_ip]
            return False
        lease.tokens -= 1
        return True

    async def _take(self, client_ip: str) -> tuple[bool, float]:
        """This request's token from the shared bucket, with a lease for the next ones
        when the bucket holds one whole."""
        key = f"rl:ip:{client_ip}"
        if self._lease_size > 1:
            leased, _ = await self._memory.token_bucket(
                key, self._rps, self._burst, cost=self._lease_size
            )
            if leased:
                if len(self._leases) >= MAX_LEASES:
                    self._leases.clear()
                until = self._clock() + LEASE_SECONDS
                self._leases[client_ip] = _Lease(tokens=self._lease_size - 1, until=until)
                return True, 0.0
        return await self._memory.token_bucket(key, self._rps, self._burst)
