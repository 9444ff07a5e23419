"""The progress line of a long command (an import, an export) on standard error:
``bastion fga import: 1,200,000 tuples (98,000/s)``, at most every :data:`EVERY` seconds,
overwritten in place on a terminal; a run shorter than that prints nothing."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["EVERY", "Progress"]

#: Seconds between two progress lines.
EVERY = 2.0


class Progress:
    def __init__(
        self,
        command: str,
        out: TextIO | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._command = command
        self._out = out or sys.stderr
        self._clock = clock
        self._start = self._last = clock()
        self._shown = False
        self._tty = self._out.isatty()

    def __call__(self, count: int, what: str = "tuples") -> None:
        """``count`` ``what`` handled so far (a running total)."""
        now = self._clock()
        if now - self._last < EVERY:
            return
        self._last = now
        self._shown = True
        rate = count / max(now - self._start, 1e-9)
        line = f"bastion {self._command}: {count:,} {what} ({rate:,.0f}/s)"
        self._out.write(f"\r{line}" if self._tty else f"{line}\n")
        self._out.flush()

    def done(self) -> None:
        if self._shown and self._tty:
            self._out.write("\n")
