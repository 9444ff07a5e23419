"""The suite's own manners towards a deployment that keeps its rate limits on.

Two things: an optional ceiling on the suite's request rate (``--max-rps``), and waiting
out a throttle. A refusal is repeated only when the deployment says the throttle answered
before the operation did anything: bastion marks such refusals with the ``Retry-After``
header plus ``bastion-throttled: before-effect`` (HTTP) or the same keys in the trailing
metadata (gRPC). Any other ``resource_exhausted`` is an answer, and the scenario sees it.
Scenarios that are about rate limits see every refusal (``Scenario.sees_throttles``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx

from bastion.conformance.outcome import Outcome

T = TypeVar("T")

#: Header and trailing-metadata key, and its value, of a refusal that changed nothing.
BEFORE_EFFECT_MARK = "bastion-throttled"
BEFORE_EFFECT_VALUE = "before-effect"
#: The longest the suite waits out throttles for one call before taking the refusal.
MAX_WAIT_PER_CALL = 120.0


def retry_safe_after(retry_after: str | None, mark: str | None) -> float | None:
    """Seconds to wait before sending the same request again, or None when the answer
    must stand (no mark, or a Retry-After that is not a number of seconds)."""
    if mark != BEFORE_EFFECT_VALUE or retry_after is None:
        return None
    try:
        seconds = float(retry_after)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def http_wait(response: httpx.Response) -> float | None:
    """How long to wait before repeating a refused HTTP call, if the refusal changed
    nothing (None: the answer stands)."""
    if response.status_code != 429:
        return None
    return retry_safe_after(
        response.headers.get("retry-after"), response.headers.get(BEFORE_EFFECT_MARK)
    )


@dataclass
class Pacer:
    """Shared by every surface of one run; counts what pacing cost."""

    max_rps: float | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    waits: int = 0
    waited_seconds: float = 0.0
    _next_slot: float = field(default=0.0, repr=False)

    def send(self, attempt: Callable[[], Outcome], *, sees_throttles: bool = False) -> Outcome:
        return self.send_raw(attempt, lambda o: o.retry_safe_after, sees_throttles=sees_throttles)

    def send_raw(
        self,
        attempt: Callable[[], T],
        wait_of: Callable[[T], float | None],
        *,
        sees_throttles: bool = False,
    ) -> T:
        """``attempt`` until its answer is not a refusal to wait out (``wait_of`` says how
        long to wait, or None)."""
        waited = 0.0
        while True:
            self._keep_rate()
            outcome = attempt()
            delay = wait_of(outcome)
            if sees_throttles or delay is None or waited + delay > MAX_WAIT_PER_CALL:
                return outcome
            # A little past the deadline: a bucket refilled "in 1 s" is refilled after it.
            pause = delay + 0.05
            self.waits += 1
            self.waited_seconds += pause
            waited += pause
            self.sleep(pause)

    def _keep_rate(self) -> None:
        if not self.max_rps:
            return
        now = self.clock()
        if self._next_slot > now:
            self.sleep(self._next_slot - now)
            now = self._next_slot
        self._next_slot = now + 1 / self.max_rps

    def summary(self) -> str:
        ceiling = f"at most {self.max_rps:g} requests/s; " if self.max_rps else ""
        return (
            f"pacing: {ceiling}{self.waits} waits for the deployment's rate limit, "
            f"{self.waited_seconds:.1f} s in all"
        )
