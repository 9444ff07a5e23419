"""Reading admin request fields the same way whichever surface built the request."""

from __future__ import annotations

from typing import Any

from core.errors import InvalidArgument


def text(request: dict[str, Any], name: str) -> str | None:
    """A string field; None when absent or null."""
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string")
    return value


def flag(request: dict[str, Any], name: str) -> bool | None:
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a boolean")
    return value


def integer(request: dict[str, Any], name: str) -> int | None:
    value = request.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)  # gRPC's JSON mapping writes int64 as a string
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer")
    return value


#: Custom webhook headers: bounded, and never one that bastion sets itself.
MAX_HEADERS = 32
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "x-authorizer-signature",
        "x-authorizer-timestamp",
        "x-authorizer-idempotency-key",
    }
)


def headers(request: dict[str, Any], name: str = "headers") -> dict[str, str] | None:
    value = request.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{name} must be a map of strings")
    if len(value) > MAX_HEADERS:
        raise InvalidArgument(f"{name}: at most {MAX_HEADERS} headers")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidArgument(f"{name} must be a map of strings")
        if not key or any(c in key for c in " :\r\n\t") or any(c in item for c in "\r\n"):
            raise InvalidArgument(f"{name}: invalid header {key!r}")
        if key.lower() in _RESERVED_HEADERS:
            raise InvalidArgument(f"{name}: {key} is set by the server")
        out[key] = item
    return out
