"""CEL conditions with OpenFGA's typed parameters, evaluated by :mod:`bastion.core.fga.cel_eval`.

Each condition is compiled once per model. At evaluation the parameters come from the
request context overlaid by the tuple's stored context (the tuple wins); every declared
parameter must be present and convert to its declared type, otherwise the evaluation
fails (OpenFGA reports that as 2000). ``ipaddress`` is OpenFGA's own CEL type, with the
``ipaddress("...")`` constructor and the ``in_cidr(string)`` method.

Bounds: an evaluation costs what cel-go would count and stops past ``max_cost``
(:mod:`.cel_cost`, OpenFGA's ``--maxConditionEvaluationCost``), and a request context
holds at most :data:`MAX_CONTEXT_VALUES` values (:func:`context_problem`), so converting
it for each evaluation stays small too. A tuple's stored context is at most
:data:`MAX_STORED_CONTEXT_BYTES` of JSON, OpenFGA's limit (:func:`stored_context_problem`):
it is kept in every cache that holds the tuple.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from bastion.core.fga.cel_cost import BUDGET, DEFAULT_MAX_CONDITION_COST, Budget
from bastion.core.fga.cel_eval import CelParseError, Program, parse
from bastion.core.fga.cel_types import CelTypeError, check_types
from bastion.core.fga.cel_values import (
    INT64,
    UINT64,
    IPAddress,
    Uint,
    parse_duration,
    parse_timestamp,
)
from bastion.core.fga.errors import ConditionError
from bastion.core.fga.model import Condition, ConditionParam

__all__ = [
    "MAX_CONTEXT_VALUES",
    "MAX_STORED_CONTEXT_BYTES",
    "CompiledCondition",
    "ConditionError",
    "IPAddress",
    "context_problem",
    "convert_parameter",
    "stored_context_problem",
]

#: Values in a request context at most: its entries plus every list item and map entry
#: inside them, at any depth.
MAX_CONTEXT_VALUES = 1000
#: A written tuple's condition context at most, as compact JSON (OpenFGA's 32 KiB).
MAX_STORED_CONTEXT_BYTES = 32 * 1024


def _values(value: Any) -> int:
    """How many values ``value`` holds (itself, and what its lists and maps hold)."""
    count, pending = 0, [value]
    while pending:
        item = pending.pop()
        count += 1
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return count


def context_problem(context: Mapping[str, Any]) -> str | None:
    """Why a request ``context`` is too large to evaluate conditions on, or ``None``."""
    sizes = {str(name): _values(value) for name, value in context.items()}
    total = sum(sizes.values())
    if total <= MAX_CONTEXT_VALUES:
        return None
    largest = max(sorted(sizes), key=sizes.__getitem__)  # the first name of the largest
    return (
        f"context holds {total} values (list items and map entries counted), at most "
        f"{MAX_CONTEXT_VALUES}; {largest!r} alone holds {sizes[largest]}"
    )


def stored_context_problem(context: Mapping[str, Any]) -> str | None:
    """Why a tuple's condition ``context`` is too large to store, or ``None``."""
    text = json.dumps(context, separators=(",", ":"), ensure_ascii=False, default=str)
    size = len(text.encode())
    if size <= MAX_STORED_CONTEXT_BYTES:
        return None
    return f"condition context is {size} bytes of JSON, at most {MAX_STORED_CONTEXT_BYTES} (32 KiB)"


def _json(value: Any, name: str) -> Any:
    """A JSON value (``TYPE_NAME_ANY``) as CEL sees it: lists, maps, strings, numbers."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_json(item, name) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _json(v, name) for k, v in value.items()}
    raise ConditionError(f"parameter {name!r} is not JSON")


def _integer(value: Any, bounds: tuple[int, int], name: str) -> int:
    if isinstance(value, bool):
        raise ConditionError(f"parameter {name!r} is not an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value)
        except ValueError as exc:
            raise ConditionError(f"parameter {name!r} is not an integer") from exc
    else:
        raise ConditionError(f"parameter {name!r} is not an integer")
    if not bounds[0] <= number <= bounds[1]:
        raise ConditionError(f"parameter {name!r} is out of range")
    return number


def _scalar(type_name: str, value: Any, name: str) -> Any:
    if type_name == "TYPE_NAME_ANY":
        return _json(value, name)
    if type_name == "TYPE_NAME_BOOL":
        if not isinstance(value, bool):
            raise ConditionError(f"parameter {name!r} is not a bool")
        return value
    if type_name == "TYPE_NAME_STRING":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a string")
        return value
    if type_name == "TYPE_NAME_INT":
        return _integer(value, INT64, name)
    if type_name == "TYPE_NAME_UINT":
        return Uint(_integer(value, UINT64, name))
    if type_name == "TYPE_NAME_DOUBLE":
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConditionError(f"parameter {name!r} is not a double")
        try:
            number = float(value)
        except ValueError as exc:
            raise ConditionError(f"parameter {name!r} is not a double") from exc
        if not math.isfinite(number):
            raise ConditionError(f"parameter {name!r} does not fit a double")
        return number
    if type_name == "TYPE_NAME_TIMESTAMP":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a timestamp")
        try:
            return parse_timestamp(value)
        except ConditionError as exc:
            raise ConditionError(f"parameter {name!r} is not an RFC 3339 timestamp") from exc
    if type_name == "TYPE_NAME_DURATION":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a duration")
        try:
            return parse_duration(value)
        except ConditionError as exc:
            raise ConditionError(f"parameter {name!r} is not a duration") from exc
    if type_name == "TYPE_NAME_IPADDRESS":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not an ipaddress")
        return IPAddress(value)
    raise ConditionError(f"parameter {name!r} has unsupported type {type_name}")


def convert_parameter(param: ConditionParam, value: Any, name: str) -> Any:
    """Convert a JSON value to the CEL value of the declared type, or raise."""
    if param.type_name == "TYPE_NAME_LIST":
        if not isinstance(value, list):
            raise ConditionError(f"parameter {name!r} is not a list")
        element = param.generic[0] if param.generic else "TYPE_NAME_ANY"
        return [_scalar(element, item, name) for item in value]
    if param.type_name == "TYPE_NAME_MAP":
        if not isinstance(value, Mapping):
            raise ConditionError(f"parameter {name!r} is not a map")
        element = param.generic[0] if param.generic else "TYPE_NAME_ANY"
        return {str(k): _scalar(element, v, name) for k, v in value.items()}
    return _scalar(param.type_name, value, name)


class CompiledCondition:
    """A condition compiled once; :meth:`evaluate` is pure."""

    def __init__(self, condition: Condition) -> None:
        self.condition = condition
        try:
            tree = parse(condition.expression)
            check_types(tree, condition.parameters)
            self._program = Program(tree)
        except (CelParseError, CelTypeError) as exc:
            raise ConditionError(f"condition {condition.name!r} does not compile: {exc}") from exc

    def evaluate(
        self,
        request_context: Mapping[str, Any] | None,
        tuple_context: Mapping[str, Any] | None,
        *,
        max_cost: int = DEFAULT_MAX_CONDITION_COST,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """The condition's value; past ``max_cost`` (0: no limit), or once ``stop``
        answers true, a :class:`ConditionError` (cel-go's cost, see :mod:`.cel_cost`)."""
        merged: dict[str, Any] = dict(request_context or {})
        merged.update(tuple_context or {})
        activation: dict[str, Any] = {}
        missing = []
        for name, param in self.condition.parameters.items():
            if name not in merged:
                missing.append(name)
                continue
            activation[name] = convert_parameter(param, merged[name], name)
        if missing:
            raise ConditionError(
                f"condition {self.condition.name!r} is missing parameters {sorted(missing)}"
            )
        activation[BUDGET] = Budget(max_cost, stop)
        try:
            result = self._program.run(activation)
        except ConditionError as exc:
            raise ConditionError(f"condition {self.condition.name!r} failed: {exc}") from exc
        if not isinstance(result, bool):
            raise ConditionError(f"condition {self.condition.name!r} did not give a bool")
        return bool(result)
