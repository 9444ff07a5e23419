"""Turning API request fields into engine inputs, with Authorizer's messages (reference §8)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bastion.core.errors import InvalidArgument
from bastion.core.fga.tuples import TupleKey
from bastion.core.limits import too_long
from bastion.service.requests import wire

__all__ = [
    "MAX_CHECKS",
    "MAX_CONTEXTUAL_TUPLES",
    "MAX_TUPLES",
    "normalise_user",
    "optional_text",
    "parse_tuple",
    "parse_tuples",
    "subject",
]

#: Checks per check_permissions call.
MAX_CHECKS = 100
#: Contextual tuples per check.
MAX_CONTEXTUAL_TUPLES = 100
#: Tuples per write or delete.
MAX_TUPLES = 100


def optional_text(request: Mapping[str, Any], name: str) -> str:
    """The engine's text fields: surrounding blanks dropped, absent is ``""``."""
    value = request.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string")
    return value.strip()


def normalise_user(user: str) -> str:
    """A bare subject id means ``user:<id>``."""
    return user if ":" in user else f"user:{user}"


def subject(user: str) -> str:
    """An explicit check subject: ``type:id`` (bare id allowed), never a userset."""
    user = normalise_user(user)
    if "#" in user:
        raise InvalidArgument(f"user must be a subject, not a userset, got {user!r}")
    object_type, _, object_id = user.partition(":")
    if not object_type or not object_id or ":" in object_id:
        raise InvalidArgument(f"user must be in type:id form, got {user!r}")
    return user


def _condition(raw: Any) -> tuple[str, dict[str, Any] | None]:
    if raw is None:
        return "", None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise InvalidArgument("condition must be an object with a name")
    context = raw.get("context")
    if context is not None and not isinstance(context, Mapping):
        raise InvalidArgument("condition context must be an object")
    if (why := too_long("condition_name", len(raw["name"]))) is not None:
        raise InvalidArgument(why)
    return raw["name"], None if context is None else dict(context)


def parse_tuple(raw: Any, missing: str) -> TupleKey:
    """``{user, relation, object, condition?{name, context?}}``; ``missing`` is the message
    for an absent part."""
    if not isinstance(raw, Mapping):
        raise InvalidArgument(missing)
    parts = []
    for name in ("user", "relation", "object"):
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgument(missing)
        parts.append(value.strip())
    user, relation, obj = normalise_user(parts[0]), parts[1], parts[2]
    for name, value in (("user", user), ("relation", relation), ("object", obj)):
        if (why := too_long(name, len(value))) is not None:
            raise InvalidArgument(why)
    condition, context = _condition(raw.get("condition"))
    return TupleKey(obj, relation, user, condition, context)


def parse_tuples(raw: Any) -> list[TupleKey]:
    """The ``tuples`` of a write or delete: 1 to :data:`MAX_TUPLES`, no duplicates."""
    if raw is None or (isinstance(raw, list) and not raw):
        raise InvalidArgument("at least one tuple is required")
    if not isinstance(raw, list):
        raise InvalidArgument("tuples must be a list")
    if len(raw) > MAX_TUPLES:
        raise InvalidArgument(f"too many tuples: max {MAX_TUPLES} per request")
    keys = [parse_tuple(t, "each tuple requires user, relation and object") for t in raw]
    seen: set[str] = set()
    for key in keys:
        if str(key) in seen:
            raise InvalidArgument(f'duplicate tuple in request: "{key}"')
        seen.add(str(key))
    return keys


_TEXT = {"type": "string"}
_TUPLES = {"type": "array", "items": {"type": "object"}}


def text_field() -> Any:
    return wire(read=optional_text, schema=_TEXT, default="")


def raw_field(schema: dict[str, Any]) -> Any:
    """A field the operation parses itself (inside its metrics and per-check errors)."""
    return wire(schema=schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckPermissionsRequest:
    user: str = text_field()
    checks: Any = raw_field({"type": "array", "items": {"type": "object"}})


@dataclass(frozen=True, slots=True, kw_only=True)
class ListPermissionsRequest:
    user: str = text_field()
    relation: str = text_field()
    object_type: str = text_field()
    context: Any = raw_field({"type": "object"})
    contextual_tuples: Any = raw_field(_TUPLES)


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteModelRequest:
    dsl: str = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class TuplesRequest:
    tuples: Any = raw_field(_TUPLES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTuplesRequest:
    user: str = text_field()
    relation: str = text_field()
    object: str = text_field()
    page_size: Any = raw_field({"type": "integer"})
    continuation_token: str = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListUsersRequest:
    object: str = text_field()
    relation: str = text_field()
    user_type: str = text_field()
    context: Any = raw_field({"type": "object"})
    contextual_tuples: Any = raw_field(_TUPLES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandRequest:
    relation: str = text_field()
    object: str = text_field()
