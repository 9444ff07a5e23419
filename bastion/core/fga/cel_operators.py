"""CEL's operators, field selection and indexing, on the values of
:mod:`bastion.core.fga.cel_values`, as cel-go evaluates them (see :mod:`.cel_eval`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from bastion.core.fga.cel_values import (
    CelEvalError,
    Duration,
    Timestamp,
    Uint,
    checked_int,
    checked_uint,
    type_name,
)

__all__ = [
    "OPERATORS",
    "equals",
    "index",
    "is_number",
    "logical_not",
    "negate",
    "no_overload",
    "select",
]


def no_overload(operator: str, *operands: Any) -> CelEvalError:
    types = ", ".join(type_name(o) for o in operands)
    return CelEvalError(f"no such overload: {operator}({types})")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same_kind(left: Any, right: Any) -> bool:
    return type_name(left) == type_name(right)


def equals(left: Any, right: Any) -> bool:
    """CEL's ``==``: numbers by value across types; other values of two types differ."""
    if is_number(left) and is_number(right):
        return bool(left == right)
    if not _same_kind(left, right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(map(equals, left, right))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(equals(v, right[k]) for k, v in left.items())
    return bool(left == right)


def _ordered(operator: str, test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(left: Any, right: Any) -> bool:
        if (is_number(left) and is_number(right)) or (
            _same_kind(left, right) and isinstance(left, str | bytes | bool | Timestamp | Duration)
        ):
            return test(left, right)
        raise no_overload(operator, left, right)

    return compare


def _contains(left: Any, right: Any) -> bool:
    if isinstance(right, list):
        return any(equals(left, item) for item in right)
    if isinstance(right, dict):
        return any(equals(left, key) for key in right)
    raise no_overload("@in", left, right)


def _add(left: Any, right: Any) -> Any:
    if isinstance(left, Timestamp) and isinstance(right, Duration):
        return Timestamp(left.nanos + right.nanos)
    if isinstance(left, Duration) and isinstance(right, Timestamp):
        return Timestamp(left.nanos + right.nanos)
    if not _same_kind(left, right):
        raise no_overload("_+_", left, right)
    if isinstance(left, Duration):
        return Duration(left.nanos + right.nanos)
    if isinstance(left, bool) or not isinstance(left, int | float | str | bytes | list):
        raise no_overload("_+_", left, right)
    return _integral(left, left + right)


def _subtract(left: Any, right: Any) -> Any:
    if isinstance(left, Timestamp) and isinstance(right, Duration):
        return Timestamp(left.nanos - right.nanos)
    if isinstance(left, Timestamp) and isinstance(right, Timestamp):
        return Duration(left.nanos - right.nanos)
    if isinstance(left, Duration) and isinstance(right, Duration):
        return Duration(left.nanos - right.nanos)
    if not (_same_kind(left, right) and is_number(left)):
        raise no_overload("_-_", left, right)
    return _integral(left, left - right)


def _multiply(left: Any, right: Any) -> Any:
    if not (_same_kind(left, right) and is_number(left)):
        raise no_overload("_*_", left, right)
    return _integral(left, left * right)


def _divide(left: Any, right: Any) -> Any:
    if not (_same_kind(left, right) and is_number(left)):
        raise no_overload("_/_", left, right)
    if isinstance(left, float):
        if right == 0:  # IEEE 754, as Go
            return (
                math.nan
                if left == 0 or math.isnan(left)
                else math.copysign(math.inf, left) * math.copysign(1, right)
            )
        return left / right
    if right == 0:
        raise CelEvalError("division by zero")
    quotient = abs(left) // abs(right)
    return _integral(left, quotient if (left < 0) == (right < 0) else -quotient)


def _modulo(left: Any, right: Any) -> Any:
    if not (_same_kind(left, right) and isinstance(left, int) and not isinstance(left, bool)):
        raise no_overload("_%_", left, right)
    if right == 0:
        raise CelEvalError("modulus by zero")
    remainder = abs(left) % abs(right)
    return _integral(left, -remainder if left < 0 else remainder)


def _integral(like: Any, value: Any) -> Any:
    """``value`` as ``like``'s type, range-checked when that is ``int`` or ``uint``."""
    if isinstance(like, Uint):
        return checked_uint(value)
    if isinstance(like, int):
        return checked_int(value)
    return value


def logical_not(value: Any) -> bool:
    if not isinstance(value, bool):
        raise no_overload("!_", value)
    return not value


def negate(value: Any) -> Any:
    if isinstance(value, Duration):
        return Duration(-value.nanos)
    if isinstance(value, float):
        return -value
    if isinstance(value, int) and not isinstance(value, bool | Uint):
        return checked_int(-value)
    raise no_overload("-_", value)


OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "relation_eq": equals,
    "relation_ne": lambda left, right: not equals(left, right),
    "relation_lt": _ordered("_<_", lambda a, b: bool(a < b)),
    "relation_le": _ordered("_<=_", lambda a, b: bool(a <= b)),
    "relation_gt": _ordered("_>_", lambda a, b: bool(a > b)),
    "relation_ge": _ordered("_>=_", lambda a, b: bool(a >= b)),
    "relation_in": _contains,
    "addition_add": _add,
    "addition_sub": _subtract,
    "multiplication_mul": _multiply,
    "multiplication_div": _divide,
    "multiplication_mod": _modulo,
}


def select(container: Any, field: str) -> Any:
    if not isinstance(container, dict):
        raise no_overload(f".{field}", container)
    if field not in container:
        raise CelEvalError(f"no such key: {field}")
    return container[field]


def index(container: Any, key: Any) -> Any:
    if isinstance(container, list):
        if isinstance(key, float) and key.is_integer():
            key = int(key)
        if not isinstance(key, int) or isinstance(key, bool):
            raise no_overload("_[_]", container, key)
        if not 0 <= key < len(container):
            raise CelEvalError(f"index out of range: {key}")
        return container[key]
    if isinstance(container, dict):
        if not isinstance(key, str | int) or isinstance(key, bool):
            raise no_overload("_[_]", container, key)
        if key not in container:
            raise CelEvalError(f"no such key: {key!r}")
        return container[key]
    raise no_overload("_[_]", container, key)
