"""A progress line on standard error for long imports and exports: at most one line every
few seconds, so a run of ten rows prints nothing and a run of millions is never silent."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

__all__ = ["Progress"]

EVERY_SECONDS = 5.0


class Progress:
    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        every: float = EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self._every, self._clock = every, clock
        self._started = self._last = clock()
        self._done: dict[str, int] = {}

    def tick(self, kind: str, rows: int) -> None:
        """``rows`` more rows of ``kind`` handled; prints when the last line is old enough."""
        self._done[kind] = self._done.get(kind, 0) + rows
        now = self._clock()
        if now - self._last < self._every:
            return
        self._last = now
        rate = self._done[kind] / max(now - self._started, 1e-9)
        self._stream.write(f"{kind}: {self._done[kind]:,} rows ({rate:,.0f}/s)\n")
        self._stream.flush()
