"""CEL conditions with OpenFGA's typed parameters, evaluated with ``cel-python`` (celpy).

Each condition is compiled once per model. At evaluation the parameters come from the
request context overlaid by the tuple's stored context (the tuple wins); every declared
parameter must be present and convert to its declared type, otherwise the evaluation
fails (OpenFGA reports that as 2000). ``ipaddress`` is OpenFGA's own CEL type, with the
``ipaddress("...")`` constructor and the ``in_cidr(string)`` method.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from bastion.core.fga.cel_types import CelTypeError, check_types
from bastion.core.fga.errors import ConditionError
from bastion.core.fga.model import Condition, ConditionParam

__all__ = ["CompiledCondition", "ConditionError", "IPAddress", "convert_parameter"]

_INT64 = (-(2**63), 2**63 - 1)
_UINT64 = (0, 2**64 - 1)
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class IPAddress:
    """OpenFGA's ``ipaddress`` CEL type."""

    def __init__(self, text: str) -> None:
        try:
            self.address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise ConditionError(f"invalid ipaddress {text!r}") from exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPAddress) and other.address == self.address

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.address)

    def in_cidr(self, cidr: str) -> bool:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise ConditionError(f"invalid CIDR {cidr!r}") from exc
        return self.address in network


def _cel_ipaddress(text: Any) -> IPAddress:
    return IPAddress(str(text))


def _cel_in_cidr(address: Any, cidr: Any) -> Any:
    if not isinstance(address, IPAddress):
        raise ConditionError("in_cidr needs an ipaddress")
    return celtypes.BoolType(address.in_cidr(str(cidr)))


_FUNCTIONS: Any = {"ipaddress": _cel_ipaddress, "in_cidr": _cel_in_cidr}


def _parse_duration(text: str) -> float:
    """A Go ``time.ParseDuration`` string (``"1h30m"``, ``"-1.5s"``) in seconds."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise ConditionError(f"invalid duration {text!r}")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not body:
        raise ConditionError(f"invalid duration {text!r}")
    return sign * total


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
        return json_to_cel(value)
    if type_name == "TYPE_NAME_BOOL":
        if not isinstance(value, bool):
            raise ConditionError(f"parameter {name!r} is not a bool")
        return celtypes.BoolType(value)
    if type_name == "TYPE_NAME_STRING":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a string")
        return celtypes.StringType(value)
    if type_name == "TYPE_NAME_INT":
        return celtypes.IntType(_integer(value, _INT64, name))
    if type_name == "TYPE_NAME_UINT":
        return celtypes.UintType(_integer(value, _UINT64, name))
    if type_name == "TYPE_NAME_DOUBLE":
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConditionError(f"parameter {name!r} is not a double")
        try:
            number = float(value)
        except ValueError as exc:
            raise ConditionError(f"parameter {name!r} is not a double") from exc
        if not math.isfinite(number):
            raise ConditionError(f"parameter {name!r} does not fit a double")
        return celtypes.DoubleType(number)
    if type_name == "TYPE_NAME_TIMESTAMP":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a timestamp")
        try:
            return celtypes.TimestampType(value)
        except (ValueError, TypeError) as exc:
            raise ConditionError(f"parameter {name!r} is not an RFC 3339 timestamp") from exc
    if type_name == "TYPE_NAME_DURATION":
        if not isinstance(value, str):
            raise ConditionError(f"parameter {name!r} is not a duration")
        total_nanos = round(_parse_duration(value) * 1e9)
        seconds, nanos = divmod(total_nanos, 10**9)
        return celtypes.DurationType(seconds, nanos)
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
        return celtypes.ListType([_scalar(element, item, name) for item in value])
    if param.type_name == "TYPE_NAME_MAP":
        if not isinstance(value, Mapping):
            raise ConditionError(f"parameter {name!r} is not a map")
        element = param.generic[0] if param.generic else "TYPE_NAME_ANY"
        return celtypes.MapType(
            {celtypes.StringType(str(k)): _scalar(element, v, name) for k, v in value.items()}
        )
    return _scalar(param.type_name, value, name)


class CompiledCondition:
    """A condition compiled once; :meth:`evaluate` is pure."""

    def __init__(self, condition: Condition) -> None:
        self.condition = condition
        env = celpy.Environment()
        try:
            ast = env.compile(condition.expression)
            check_types(ast, condition.parameters)
        except (CELParseError, CelTypeError) as exc:
            raise ConditionError(f"condition {condition.name!r} does not compile: {exc}") from exc
        self._program = env.program(ast, functions=_FUNCTIONS)

    def evaluate(
        self, request_context: Mapping[str, Any] | None, tuple_context: Mapping[str, Any] | None
    ) -> bool:
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
        try:
            result = self._program.evaluate(activation)
        except (CELEvalError, ConditionError, TypeError, ValueError, KeyError) as exc:
            raise ConditionError(f"condition {self.condition.name!r} failed: {exc}") from exc
        if not isinstance(result, celtypes.BoolType | bool):
            raise ConditionError(f"condition {self.condition.name!r} did not give a bool")
        return bool(result)
