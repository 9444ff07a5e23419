"""What no request may carry, on any surface: checked on the decoded request (a JSON
body, GraphQL arguments, a gRPC message as a dict) before any service code runs.

- nesting deeper than :data:`MAX_DEPTH` (explicit, not Python's recursion limit);
- a NUL character in any string (no database stores it the same way; PostgreSQL
  refuses it outright);
- an unpaired UTF-16 surrogate (``"\\udfff"`` in JSON): not a character, not encodable.

Refusals name the field (a dotted path) so the caller can find it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_DEPTH", "refusal"]

#: Containers inside containers: far beyond any real request, far below recursion limits.
MAX_DEPTH = 64


def refusal(value: Any, where: str = "request") -> str | None:
    """Why ``value`` may not be accepted, or None."""
    return _walk(value, where, 0)


def _walk(value: Any, where: str, depth: int) -> str | None:
    if isinstance(value, str):
        return _text_refusal(value, where)
    if isinstance(value, Mapping | list | tuple):
        if depth >= MAX_DEPTH:
            return f"{where} is nested more than {MAX_DEPTH} levels deep"
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            path = f"{where}.{key}" if isinstance(value, Mapping) else f"{where}[{key}]"
            if isinstance(key, str) and (found := _text_refusal(key, f"{where} (a key)")):
                return found
            if found := _walk(item, path, depth + 1):
                return found
    return None


def _text_refusal(text: str, where: str) -> str | None:
    if "\x00" in text:
        return f"{where} contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{where} is not valid text (an unpaired surrogate)"
    return None
