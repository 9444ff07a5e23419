"""Reading request fields the same way whatever surface built the request mapping.

REST passes JSON, GraphQL its coerced ``params``, gRPC ``MessageToDict`` (which leaves out
empty strings, renders int64 as strings and wraps maps as ``{"value": {...}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.errors import InvalidArgument

__all__ = ["flag", "mapping", "optional_text", "relations", "strings", "text"]


def text(request: Mapping[str, Any], name: str) -> str:
    value = request.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string")
    return value


def optional_text(request: Mapping[str, Any], name: str) -> str | None:
    value = text(request, name)
    return value or None


def strings(request: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = request.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{name} must be a list of strings")
    return tuple(value)


def flag(request: Mapping[str, Any], name: str) -> bool | None:
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a boolean")
    return value


def mapping(request: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """A free JSON object (``app_data``); gRPC's ``{"value": {...}}`` wrapper is undone."""
    value = request.get(name)
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"value"} and isinstance(value["value"], dict):
        value = value["value"]
    if not isinstance(value, dict):
        raise InvalidArgument(f"{name} must be an object")
    return dict(value)


def relations(request: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    raw = request.get("required_relations")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidArgument("required_relations must be a list")
    found = []
    for item in raw:
        if not isinstance(item, dict):
            raise InvalidArgument("each required relation needs relation and object")
        relation, obj = item.get("relation"), item.get("object")
        if not isinstance(relation, str) or not isinstance(obj, str) or not relation or not obj:
            raise InvalidArgument("each required relation needs relation and object")
        found.append((relation, obj))
    return tuple(found)
