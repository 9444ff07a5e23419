"""How union, intersection and exclusion combine their children's outcomes.

Children are evaluated in order (each called with the same ``args``), so a decisive
answer stops the rest:

* union: the first ``True`` wins, even over earlier errors; otherwise an error; otherwise
  ``False`` (with the cycle flag if any child had it);
* intersection: the first ``False`` (or cycle) wins, even over errors; otherwise an error;
  otherwise ``True``;
* exclusion: base ``False``/cycle, or subtract ``True``/cycle, give ``False``; otherwise an
  error on either side; otherwise ``True``.

Passing the children's shared arguments instead of closures keeps the hot path of Check
free of a closure per child.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from bastion.core.fga.errors import FgaError
from bastion.core.fga.result import ALLOWED, CYCLE, DENIED, Outcome

__all__ = ["Thunk", "difference", "intersection", "union"]

Thunk = Callable[..., Outcome]


def union(children: Iterable[Thunk], *args: Any) -> Outcome:
    error: FgaError | None = None
    cycle = False
    for child in children:
        outcome = child(*args)
        if outcome is DENIED:  # the common answer, by identity: nothing to combine
            continue
        if outcome.allowed:
            return ALLOWED
        if outcome.error is not None and error is None:
            error = outcome.error
        cycle = cycle or outcome.cycle
    if error is not None:
        return Outcome(False, cycle, error)
    return CYCLE if cycle else DENIED


def intersection(children: Iterable[Thunk], *args: Any) -> Outcome:
    error: FgaError | None = None
    for child in children:
        outcome = child(*args)
        if outcome.error is not None:
            error = error or outcome.error
        elif not outcome.allowed:
            return outcome
    return Outcome.failed(error) if error is not None else ALLOWED


def difference(base: Thunk, subtract: Thunk, *args: Any) -> Outcome:
    base_outcome = base(*args)
    if base_outcome.error is None and not base_outcome.allowed:
        return base_outcome
    subtract_outcome = subtract(*args)
    if subtract_outcome.error is None and (subtract_outcome.allowed or subtract_outcome.cycle):
        return Outcome(False, subtract_outcome.cycle)
    error = base_outcome.error or subtract_outcome.error
    return Outcome.failed(error) if error is not None else ALLOWED
