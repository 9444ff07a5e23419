"""What one resolution step answers: allowed, the cycle flag, or a deferred error."""

from __future__ import annotations

from dataclasses import dataclass

from bastion.core.fga.errors import FgaError

__all__ = ["ALLOWED", "CYCLE", "DENIED", "Outcome"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One sub-problem's answer.

    ``error`` is set when the step failed; the reducers decide whether a sibling's answer
    makes it irrelevant. ``cycle`` marks a ``False`` that came from revisiting a step, which
    must not be cached as definitive.
    """

    allowed: bool
    cycle: bool = False
    error: FgaError | None = None

    @staticmethod
    def failed(error: FgaError) -> Outcome:
        return Outcome(False, error=error)


ALLOWED = Outcome(True)
DENIED = Outcome(False)
CYCLE = Outcome(False, cycle=True)
