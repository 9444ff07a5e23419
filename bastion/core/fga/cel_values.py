"""CEL's values as Python values, and the conversions between them.

``int``, ``double``, ``bool``, ``string``, ``bytes``, ``null``, ``list`` and ``map`` are
Python's ``int``, ``float``, ``bool``, ``str``, ``bytes``, ``None``, ``list`` and ``dict``;
``uint`` is :class:`Uint` (an ``int`` that remembers it is unsigned); timestamps and
durations are whole nanoseconds (:class:`Timestamp`, :class:`Duration`), so arithmetic
and comparison on them are exact; ``ipaddress`` is OpenFGA's :class:`IPAddress`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from bastion.core.fga.errors import ConditionError

__all__ = [
    "INT64",
    "UINT64",
    "CelEvalError",
    "Duration",
    "IPAddress",
    "Timestamp",
    "Uint",
    "checked_int",
    "checked_uint",
    "format_timestamp",
    "parse_duration",
    "parse_timestamp",
    "type_name",
]

INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
_NANOS = 10**9
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: CEL's timestamp range (years 1 to 9999) and duration range (about 10,000 years)
_TIMESTAMP_RANGE = (-62_135_596_800 * _NANOS, 253_402_300_800 * _NANOS - 1)
_DURATION_LIMIT = 315_576_000_000 * _NANOS + 999_999_999
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": _NANOS,
    "m": 60 * _NANOS,
    "h": 3600 * _NANOS,
}


class CelEvalError(ConditionError):
    """An evaluation error: a CEL error value, absorbed by ``&&`` / ``||`` where the other
    side decides, raised otherwise."""


class Uint(int):
    """CEL's ``uint``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """``google.protobuf.Timestamp``: nanoseconds since the Unix epoch, UTC."""

    nanos: int

    def __post_init__(self) -> None:
        if not _TIMESTAMP_RANGE[0] <= self.nanos <= _TIMESTAMP_RANGE[1]:
            raise CelEvalError("timestamp out of range")

    def datetime(self, tz: dt.tzinfo = dt.UTC) -> dt.datetime:
        """To the microsecond (what ``datetime`` holds): for the calendar getters."""
        seconds, nanos = divmod(self.nanos, _NANOS)
        moment = _EPOCH + dt.timedelta(seconds=seconds, microseconds=nanos // 1000)
        try:
            return moment.astimezone(tz)
        except OverflowError as exc:  # 9999-12-31 in a zone east of UTC
            raise CelEvalError("timestamp out of range in that time zone") from exc


@dataclass(frozen=True, slots=True, order=True)
class Duration:
    """``google.protobuf.Duration``: signed nanoseconds."""

    nanos: int

    def __post_init__(self) -> None:
        if abs(self.nanos) > _DURATION_LIMIT:
            raise CelEvalError("duration out of range")


class IPAddress:
    """OpenFGA's ``ipaddress`` CEL type."""

    __slots__ = ("address",)

    def __init__(self, text: str) -> None:
        try:
            self.address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise CelEvalError(f"invalid ipaddress {text!r}") from exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPAddress) and other.address == self.address

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.address)

    def __repr__(self) -> str:
        return f"ipaddress({str(self.address)!r})"

    def in_cidr(self, cidr: str) -> bool:
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise CelEvalError(f"invalid CIDR {cidr!r}") from exc
        return self.address in network


def type_name(value: Any) -> str:
    """The CEL type of a value, as cel-go names it in messages."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Uint):
        return "uint"
    if isinstance(value, int):
        return "int"
    names = {
        float: "double",
        str: "string",
        bytes: "bytes",
        type(None): "null_type",
        list: "list",
        dict: "map",
        Timestamp: "google.protobuf.Timestamp",
        Duration: "google.protobuf.Duration",
        IPAddress: "ipaddress",
    }
    return names.get(type(value), type(value).__name__)


def checked_int(value: int) -> int:
    if not INT64[0] <= value <= INT64[1]:
        raise CelEvalError("int overflow")
    return int(value)


def checked_uint(value: int) -> Uint:
    if not UINT64[0] <= value <= UINT64[1]:
        raise CelEvalError("uint overflow")
    return Uint(value)


def parse_timestamp(text: str) -> Timestamp:
    """An RFC 3339 timestamp, as Go's ``time.Parse(time.RFC3339, ...)`` takes it."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise CelEvalError(f"invalid timestamp {text!r}")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction = (match.group(7) or "").ljust(9, "0")
    try:
        moment = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
    except ValueError as exc:
        raise CelEvalError(f"invalid timestamp {text!r}") from exc
    offset = 0
    if match.group(9):
        if int(match.group(10)) > 23 or int(match.group(11)) > 59:
            raise CelEvalError(f"invalid timestamp {text!r}")
        offset = (int(match.group(10)) * 60 + int(match.group(11))) * 60
        offset = -offset if match.group(9) == "+" else offset
    seconds = int((moment - _EPOCH).total_seconds()) + offset
    return Timestamp(seconds * _NANOS + int(fraction))


def format_timestamp(value: Timestamp) -> str:
    """RFC 3339 in UTC with the fraction Go prints (none, or trailing zeros dropped)."""
    seconds, nanos = divmod(value.nanos, _NANOS)
    moment = _EPOCH + dt.timedelta(seconds=seconds)
    text = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}"
    return text + (f".{nanos:09d}".rstrip("0") if nanos else "") + "Z"


def parse_duration(text: str) -> Duration:
    """A Go ``time.ParseDuration`` string (``"1h30m"``, ``"-1.5s"``), to the nanosecond."""
    sign = -1 if text.startswith("-") else 1
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return Duration(0)
    if not body:
        raise CelEvalError(f"invalid duration {text!r}")
    pos, total = 0, 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None or not (match.group(1) or match.group(2)):
            raise CelEvalError(f"invalid duration {text!r}")
        whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3)
        scale = _DURATION_UNITS[unit]
        total += int(whole or "0") * scale + int(fraction or "0") * scale // 10 ** len(fraction)
        pos = match.end()
    return Duration(sign * total)
