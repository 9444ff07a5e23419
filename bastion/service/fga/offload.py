"""Evaluations of a request that sent a context run off the event loop, within the
request's deadline.

A context brings the caller's lists and maps into condition evaluation; even bounded by
the cost budget (``--fga-max-condition-cost``, 0 for none) such an evaluation may be long,
and on the event loop it would stall every other request of the process (``/healthz``
included). So it runs in a worker thread, at most :data:`EVALUATION_THREADS` at once per
process, and a :class:`Stop` asked by the evaluation every few thousand cost units ends it
once the request's deadline (``--request-timeout``, a gRPC call's) has passed or the
request was given up: an abandoned thread does not run on.

Such an evaluation's rounds (:meth:`~service.fga.engine.EngineState.evaluate`) run in
the thread and its fetches on the loop; a round reads the process's read cache without
touching it (one dict read under the GIL, while the loop may discard or add entries).
Evaluations with a context never use the shared check cache. (The parameters the server
fills, ``--fga-server-context``, are scalars: alone, they evaluate on the loop.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TypeVar

import trio

__all__ = ["EVALUATION_THREADS", "Stop", "off_loop"]

T = TypeVar("T")
#: Worker threads evaluating at once per process: the GIL lets one run at a time, and the
#: event loop takes its turn between them.
EVALUATION_THREADS = 4


class Stop:
    """True once the request's deadline has passed, or once the request gave up waiting."""

    __slots__ = ("_at", "given_up")

    def __init__(self, at: float) -> None:
        self._at = at
        self.given_up = False

    @classmethod
    def for_request(cls) -> Stop:
        """The calling task's effective deadline, on :func:`time.monotonic`'s scale (any
        thread may ask it)."""
        remaining = trio.current_effective_deadline() - trio.current_time()
        return cls(math.inf if math.isinf(remaining) else time.monotonic() + remaining)

    def __call__(self) -> bool:
        return self.given_up or time.monotonic() >= self._at


async def off_loop(work: Callable[[], T], stop: Stop, limiter: trio.CapacityLimiter) -> T:
    """``work()`` in a worker thread; a cancelled caller stops waiting at once and the
    work stops at its next question to ``stop``. One ``stop`` may serve several calls
    (the rounds of one evaluation)."""
    try:
        done = await trio.to_thread.run_sync(work, abandon_on_cancel=True, limiter=limiter)
    except BaseException:
        stop.given_up = True
        raise
    if stop():
        # The deadline passed while it ran: what it returns may be cut short (a condition
        # stopped), not an answer. The loop may not have cancelled the request yet (a
        # busy loop runs its timers late); it does at its deadline, which has come.
        await trio.sleep_forever()
    return done
