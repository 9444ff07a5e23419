"""How union, intersection and exclusion combine their children's outcomes.

Children are thunks evaluated in order, so a decisive answer stops the rest:

* union: the first ``True`` wins, even over earlier errors; otherwise an error; otherwise
  ``False`` (with the cycle flag if any child had it);
* intersection: the first ``False`` (or cycle) wins, even over errors; otherwise an error;
  otherwise ``True``;
* exclusion: base ``False``/cycle, or subtract ``True``/cycle, give ``False``; otherwise an
  error on either side; otherwise ``True``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from core.fga.errors import FgaError
from core.fga.result import ALLOWED, DENIED, Outcome

__all__ = ["difference", "intersection", "union"]

Thunk = Callable[[], Outcome]


def union(children: Iterable[Thunk]) -> Outcome:
    error: FgaError | None = None
    cycle = False
    for child in children:
        outcome = child()
        if outcome.allowed:
            return ALLOWED
        if outcome.error is not None and error is None:
            error = outcome.error
        cycle = cycle or outcome.cycle
    if error is not None:
        return Outcome(False, cycle, error)
    return Outcome(False, cycle) if cycle else DENIED


def intersection(children: Iterable[Thunk]) -> Outcome:
    error: FgaError | None = None
    for child in children:
        outcome = child()
        if outcome.error is not None:
            error = error or outcome.error
        elif not outcome.allowed:
            return outcome
    return Outcome.failed(error) if error is not None else ALLOWED


def difference(base: Thunk, subtract: Thunk) -> Outcome:
    base_outcome = base()
    if base_outcome.error is None and not base_outcome.allowed:
        return base_outcome
    subtract_outcome = subtract()
    if subtract_outcome.error is None and (subtract_outcome.allowed or subtract_outcome.cycle):
        return Outcome(False, subtract_outcome.cycle)
    error = base_outcome.error or subtract_outcome.error
    return Outcome.failed(error) if error is not None else ALLOWED
