"""The per-client-IP rate limit shared by every surface and every server instance.

One token bucket per client address lives in the memory store, so N instances sharing
a database (or Redis) share the budget. Later throttles (failed logins, resends) reuse
the same store primitive under their own keys.
"""

from __future__ import annotations

import logging
import math

from core.errors import ResourceExhausted, Unavailable
from storage.memory.base import MemoryStore
from transports.metrics import Metrics

log = logging.getLogger("bastion.ratelimit")

RATE_LIMIT_MESSAGE = "Too many requests. Please try again later."
UNAVAILABLE_MESSAGE = "Rate limiting is temporarily unavailable. Please try again later."


class RateLimiter:
    def __init__(
        self,
        memory: MemoryStore,
        *,
        rps: float,
        burst: int,
        fail_closed: bool,
        metrics: Metrics,
    ) -> None:
        self._memory = memory
        self._rps = rps
        self._burst = max(1, burst)
        self._fail_closed = fail_closed
        self._metrics = metrics

    @property
    def enabled(self) -> bool:
        return self._rps > 0

    async def check(self, client_ip: str, *, surface: str) -> None:
        """Spend one token for ``client_ip`` or raise ResourceExhausted.

        A store failure lets the request through (the limit is a guard, not the
        product) unless ``--rate-limit-fail-closed`` asks for 503 instead.
        """
        if not self.enabled:
            return
        try:
            allowed, retry_after = await self._memory.token_bucket(
                f"rl:ip:{client_ip}", self._rps, self._burst
            )
        except Exception:
            log.warning("rate limit store unavailable", exc_info=True)
            if self._fail_closed:
                raise Unavailable(UNAVAILABLE_MESSAGE) from None
            return
        if not allowed:
            self._metrics.rate_limited.labels(surface).inc()
            raise ResourceExhausted(RATE_LIMIT_MESSAGE, retry_after=math.ceil(retry_after))
