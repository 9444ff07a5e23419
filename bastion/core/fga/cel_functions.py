"""CEL's standard functions and methods that a condition can call, with OpenFGA's
``ipaddress`` / ``in_cidr``: conversions, strings, RE2 ``matches``, timestamp and
duration getters (see :mod:`.cel_eval`)."""

from __future__ import annotations

import math
import re
import zoneinfo
from collections.abc import Callable
from datetime import UTC, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any

import re2  # type: ignore[import-untyped]

from bastion.core.fga.cel_operators import no_overload
from bastion.core.fga.cel_values import (
    CelEvalError,
    Duration,
    IPAddress,
    Timestamp,
    Uint,
    checked_int,
    checked_uint,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)

__all__ = ["FUNCTIONS", "METHODS"]


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(
    r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I
)
_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})")


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    raise no_overload("size", value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise no_overload("int", value)
    if isinstance(value, int):
        return checked_int(value)
    if isinstance(value, float):
        if not math.isfinite(value) or not -(2.0**63) <= value < 2.0**63:
            raise CelEvalError("double out of int range")
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        return checked_int(int(value))
    if isinstance(value, Timestamp):
        return value.nanos // 10**9
    raise no_overload("int", value)


def _to_uint(value: Any) -> Uint:
    if isinstance(value, bool):
        raise no_overload("uint", value)
    if isinstance(value, int):
        return checked_uint(value)
    if isinstance(value, float):
        if not math.isfinite(value) or not 0 <= value < 2.0**64:
            raise CelEvalError("double out of uint range")
        return Uint(int(value))
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        return checked_uint(int(value))
    raise no_overload("uint", value)


def _to_double(value: Any) -> float:
    if isinstance(value, bool):
        raise no_overload("double", value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and _FLOAT_TEXT.fullmatch(value):
        return float(value)
    raise no_overload("double", value)


def _format_double(value: float) -> str:
    """Go's ``%g`` (shortest digits; an exponent below -4 or from 6 up), as cel-go's
    ``string(double)`` prints."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    significant = "".join(map(str, digit_tuple)).lstrip("0")
    point = len(significant) + exponent  # value = 0.<significant> * 10**point
    digits, sign = significant.rstrip("0"), "-" if value < 0 else ""
    if not -4 <= point - 1 < 6:
        tail = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{tail}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return _format_double(value)
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError as exc:
            raise CelEvalError("invalid UTF-8 in bytes") from exc
    if isinstance(value, Timestamp):
        return format_timestamp(value)
    if isinstance(value, Duration):
        seconds, nanos = divmod(abs(value.nanos), 10**9)
        fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
        return f"{'-' if value.nanos < 0 else ''}{seconds}{fraction}s"
    if isinstance(value, IPAddress):
        return str(value.address)
    raise no_overload("string", value)


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in _TRUE + _FALSE:
        return value in _TRUE
    raise no_overload("bool", value)


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise no_overload("bytes", value)


def _to_timestamp(value: Any) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    if isinstance(value, str):
        return parse_timestamp(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return Timestamp(value * 10**9)
    raise no_overload("timestamp", value)


def _to_duration(value: Any) -> Duration:
    if isinstance(value, Duration):
        return value
    if isinstance(value, str):
        return parse_duration(value)
    raise no_overload("duration", value)


def _to_ipaddress(value: Any) -> IPAddress:
    if not isinstance(value, str):
        raise no_overload("ipaddress", value)
    return IPAddress(value)


def _string_test(name: str, test: Callable[[str, str], bool]) -> Callable[[Any, Any], bool]:
    def run(receiver: Any, argument: Any) -> bool:
        if not (isinstance(receiver, str) and isinstance(argument, str)):
            raise no_overload(name, receiver, argument)
        return test(receiver, argument)

    return run


def _matches(text: Any, pattern: Any) -> bool:
    if not (isinstance(text, str) and isinstance(pattern, str)):
        raise no_overload("matches", text, pattern)
    try:
        return re2.search(pattern, text) is not None
    except re2.error as exc:
        raise CelEvalError(f"invalid regular expression {pattern!r}") from exc


def _in_cidr(address: Any, cidr: Any) -> bool:
    if not (isinstance(address, IPAddress) and isinstance(cidr, str)):
        raise no_overload("in_cidr", address, cidr)
    return address.in_cidr(cidr)


def _zone(name: Any) -> tzinfo:
    if not isinstance(name, str):
        raise no_overload("timezone", name)
    offset = _OFFSET.fullmatch(name)
    if offset is not None:
        minutes = int(offset.group(2)) * 60 + int(offset.group(3))
        return timezone(timedelta(minutes=-minutes if offset.group(1) == "-" else minutes))
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise CelEvalError(f"unknown time zone {name!r}") from exc


def _timestamp_getter(name: str, part: Callable[[Any], int]) -> Callable[..., int]:
    def run(receiver: Any, *zone: Any) -> int:
        if not isinstance(receiver, Timestamp) or len(zone) > 1:
            raise no_overload(name, receiver, *zone)
        return part(receiver.datetime(_zone(zone[0]) if zone else UTC))

    return run


def _getter(
    name: str, on_timestamp: Callable[[Any], int], per_duration: int | None
) -> Callable[..., int]:
    from_timestamp = _timestamp_getter(name, on_timestamp)

    def run(receiver: Any, *zone: Any) -> int:
        if isinstance(receiver, Duration) and per_duration is not None and not zone:
            nanos = abs(receiver.nanos) // per_duration
            return -nanos if receiver.nanos < 0 else nanos
        return from_timestamp(receiver, *zone)

    return run


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "int": _to_int,
    "uint": _to_uint,
    "double": _to_double,
    "string": _to_string,
    "bool": _to_bool,
    "bytes": _to_bytes,
    "timestamp": _to_timestamp,
    "duration": _to_duration,
    "ipaddress": _to_ipaddress,
    "dyn": lambda value: value,
    "matches": _matches,
}
METHODS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "contains": _string_test("contains", lambda s, t: t in s),
    "startsWith": _string_test("startsWith", str.startswith),
    "endsWith": _string_test("endsWith", str.endswith),
    "matches": _matches,
    "in_cidr": _in_cidr,
    "getFullYear": _timestamp_getter("getFullYear", lambda d: d.year),
    "getMonth": _timestamp_getter("getMonth", lambda d: d.month - 1),
    "getDate": _timestamp_getter("getDate", lambda d: d.day),
    "getDayOfMonth": _timestamp_getter("getDayOfMonth", lambda d: d.day - 1),
    "getDayOfWeek": _timestamp_getter("getDayOfWeek", lambda d: (d.weekday() + 1) % 7),
    "getDayOfYear": _timestamp_getter("getDayOfYear", lambda d: d.timetuple().tm_yday - 1),
    "getHours": _getter("getHours", lambda d: d.hour, 3600 * 10**9),
    "getMinutes": _getter("getMinutes", lambda d: d.minute, 60 * 10**9),
    "getSeconds": _getter("getSeconds", lambda d: d.second, 10**9),
    "getMilliseconds": _getter("getMilliseconds", lambda d: d.microsecond // 1000, 10**6),
}
