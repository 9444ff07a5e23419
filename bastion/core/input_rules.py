"""What no request may carry, on any surface: checked on the decoded request (a JSON
body, GraphQL arguments, a gRPC message as a dict) before any service code runs.

- nesting deeper than :data:`MAX_DEPTH` (explicit, not Python's recursion limit);
- a NUL character in any string (no database stores it the same way; PostgreSQL
  refuses it outright);
- an unpaired UTF-16 surrogate (``"\\udfff"`` in JSON): not a character, not encodable;
- an integer outside 64 bits (SQL's ``bigint``, protobuf's ``int64``): no column, message
  or offset holds it (``from_timestamp: 1e30`` as an integer overflowed PostgreSQL).

Refusals name the field (a dotted path) so the caller can find it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_DEPTH", "refusal"]

#: Containers inside containers: far beyond any real request, far below recursion limits.
MAX_DEPTH = 64
#: The integers every store and wire format holds: signed 64-bit.
MIN_INTEGER, MAX_INTEGER = -(2**63), 2**63 - 1


def refusal(value: Any, where: str = "request") -> str | None:
    """Why ``value`` may not be accepted, or None.

    The walk builds no field path for an acceptable value (nearly every one): the path
    of a refused one is put together on the way back out.
    """
    found = _walk(value, 0)
    if found is None:
        return None
    steps, problem = found
    for step in reversed(steps):
        where = f"{where}{step}"
    return problem(where)


#: A refusal found inside a value: the steps to it (``.key``, ``[3]``, `` (a key)``,
#: outermost last) and its message given the full path.
_Found = tuple[list[str], "_Problem"]


class _Problem:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __call__(self, where: str) -> str:
        return f"{where} {self.text}"


_NUL = _Problem("contains a NUL character")
_SURROGATE = _Problem("is not valid text (an unpaired surrogate)")
_DEEP = _Problem(f"is nested more than {MAX_DEPTH} levels deep")
_HUGE = _Problem("is out of range (integers are 64-bit)")


def _walk(value: Any, depth: int) -> _Found | None:
    kind = type(value)
    if kind is str:
        problem = _text_problem(value)
        return None if problem is None else ([], problem)
    if kind is int:
        return None if MIN_INTEGER <= value <= MAX_INTEGER else ([], _HUGE)
    if kind is dict or kind is list or kind is tuple or isinstance(value, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            return [], _DEEP
        if isinstance(value, Mapping):
            for key, item in value.items():
                if type(key) is str and (problem := _text_problem(key)) is not None:
                    return [" (a key)"], problem
                if (found := _walk(item, depth + 1)) is not None:
                    found[0].append(f".{key}")
                    return found
        else:
            for index, item in enumerate(value):
                if (found := _walk(item, depth + 1)) is not None:
                    found[0].append(f"[{index}]")
                    return found
    elif isinstance(value, str):
        return _walk(str(value), depth)
    return None


def _text_problem(text: str) -> _Problem | None:
    if "\x00" in text:
        return _NUL
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE
    return None
