"""What a CEL evaluation costs, counted as cel-go counts it, and the budget that bounds it.

cel-go's runtime cost (``interpreter/runtimecost.go``), which OpenFGA limits with
``--maxConditionEvaluationCost`` (default 100): a variable, a field selection or an index
costs 1; a literal 0; a list literal 10 and a map literal 30; an operator or function
call 1, except the ones whose work grows with their operands (``in`` a list: the list's
size; ``==``, ``!=`` and string ordering: a tenth of the smaller size; string ``+``,
``string(bytes)`` and ``bytes(string)``: a tenth of the sizes; ``startsWith`` /
``endsWith`` / ``contains`` / ``matches`` on their strings' lengths). A comprehension
costs what its macro expands to in cel-go: per element ``all`` 3, ``exists`` 4,
``exists_one`` 1 (2 on a match), ``map`` 12, ``filter`` 1 (13 for an element kept), plus
its predicate's own cost; and 1 for its result (2 for ``exists_one``).

A :class:`Budget` is charged before the work it pays for; a charge past the limit, or a
``stop`` callback that answers true (asked every :data:`CHECK_EVERY` units), ends the
evaluation with :class:`EvaluationCancelled`, which no ``&&``, ``||`` or quantifier
absorbs (cel-go's cancellation is not an error value either).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from bastion.core.fga.errors import ConditionError

__all__ = [
    "BUDGET",
    "CHECK_EVERY",
    "COST_EXCEEDED",
    "DEFAULT_MAX_CONDITION_COST",
    "Budget",
    "EvaluationCancelled",
    "call_cost",
    "spend",
]

#: OpenFGA's default ``--maxConditionEvaluationCost``.
DEFAULT_MAX_CONDITION_COST = 100
#: cel-go's message when the limit is passed.
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
STOPPED = "operation cancelled: the request's deadline passed"
#: Units between two questions to ``stop``.
CHECK_EVERY = 10_000
#: The activation key the running budget travels under (no CEL identifier has an ``@``).
BUDGET = "@budget"
_UNBOUNDED = 2**62
_TENTH = 0.1
_REGEX = 0.25  # cel-go's RegexStringLengthCostFactor


class EvaluationCancelled(ConditionError):
    """The budget ran out, or the request's deadline passed: the evaluation stops."""


class Budget:
    """One evaluation's allowance: ``limit`` units (0: no limit), and ``stop``, asked every
    :data:`CHECK_EVERY` units, to end it early (the request's deadline)."""

    __slots__ = ("floor", "left", "limit", "stop")

    def __init__(self, limit: int = 0, stop: Callable[[], bool] | None = None) -> None:
        self.limit = limit
        self.stop = stop
        self.left = limit if limit > 0 else _UNBOUNDED
        self.floor = 0 if stop is None else max(0, self.left - CHECK_EVERY)

    @property
    def spent(self) -> int:
        return (self.limit if self.limit > 0 else _UNBOUNDED) - self.left

    def overdrawn(self) -> None:
        """Called by :func:`spend` once ``left`` is below ``floor``."""
        if self.left < 0:
            raise EvaluationCancelled(COST_EXCEEDED)
        if self.stop is not None:
            if self.stop():
                raise EvaluationCancelled(STOPPED)
            self.floor = max(0, self.left - CHECK_EVERY)


def spend(activation: Mapping[str, Any], units: int) -> None:
    """Charge the running evaluation's budget (the hot path: one subtraction, one test)."""
    budget: Budget = activation[BUDGET]
    budget.left -= units
    if budget.left < budget.floor:
        budget.overdrawn()


_SIZED = (str, bytes, list, dict)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, _SIZED) else 1


def _tenths(size: int) -> int:
    return max(1, math.ceil(size * _TENTH))


def _compare(left: Any, right: Any, *_: Any) -> int:
    if isinstance(left, _SIZED) and isinstance(right, _SIZED):
        return _tenths(min(len(left), len(right)))
    return 1


def _contains_in(_item: Any, container: Any = None, *_: Any) -> int:
    return max(1, len(container)) if isinstance(container, list) else 1


def _add(left: Any, right: Any = None, *_: Any) -> int:
    if isinstance(left, str | bytes) and isinstance(right, str | bytes):
        return _tenths(len(left) + len(right))
    return 1


def _prefix(text: Any, *_: Any) -> int:
    return _tenths(_size(text))


def _contains(text: Any, part: Any = None, *_: Any) -> int:
    return _tenths(_size(text)) * _tenths(_size(part))


def _matches(text: Any, pattern: Any = None, *_: Any) -> int:
    return _tenths(1 + _size(text)) * max(1, math.ceil(_size(pattern) * _REGEX))


def _of_type(kind: type) -> Callable[..., int]:
    """A conversion that copies a ``kind`` argument (``string(bytes)``, ``bytes(string)``)."""

    def cost(value: Any, *_: Any) -> int:
        return _tenths(_size(value)) if isinstance(value, kind) else 1

    return cost


_COSTS: dict[str, Callable[..., int]] = {
    "relation_eq": _compare,
    "relation_ne": _compare,
    "relation_lt": _compare,
    "relation_le": _compare,
    "relation_gt": _compare,
    "relation_ge": _compare,
    "relation_in": _contains_in,
    "addition_add": _add,
    "startsWith": _prefix,
    "endsWith": _prefix,
    "contains": _contains,
    "matches": _matches,
    "string": _of_type(bytes),
    "bytes": _of_type(str),
}


def call_cost(name: str) -> Callable[..., int] | None:
    """What a call of the operator (the parser's name, ``relation_in``), function or
    method ``name`` costs on its operands (a method's receiver first), at least 1;
    ``None`` when it is always 1."""
    return _COSTS.get(name)
