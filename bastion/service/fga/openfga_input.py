"""OpenFGA's request fields as engine inputs, and OpenFGA's errors (``{code, message}``
with an HTTP status) for everything its API refuses."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bastion.core.errors import InvalidArgument
from bastion.core.fga.conditions import context_problem
from bastion.core.fga.errors import FgaError
from bastion.core.fga.tuples import TupleKey
from bastion.core.limits import too_long

__all__ = [
    "OpenFgaError",
    "as_openfga_error",
    "page_size",
    "rfc3339",
    "tuple_json",
    "tuple_key",
    "tuple_keys",
    "user_json",
]

#: OpenFGA's default and largest page of Read, ReadChanges, ListStores, ReadAuthorizationModels.
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
#: Tuples per Write (writes plus deletes), as OpenFGA's default maxTuplesPerWrite.
MAX_TUPLES_PER_WRITE = 100


class OpenFgaError(Exception):
    """A refusal as OpenFGA words it: ``code`` is the name of its error enum."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def validation(message: str) -> OpenFgaError:
    return OpenFgaError(400, "validation_error", message)


def as_openfga_error(exc: InvalidArgument) -> OpenFgaError:
    """The engine's refusals carry OpenFGA's numeric code; the name is its wire code."""
    if isinstance(exc, FgaError):
        return OpenFgaError(400, exc.fga_code.name.lower(), exc.message)
    return validation(exc.message)


#: OpenFGA's ``ConsistencyPreference``; only the last one asks for more than the default.
CONSISTENCY = ("UNSPECIFIED", "MINIMIZE_LATENCY", "HIGHER_CONSISTENCY")


def higher_consistency(raw: Any) -> bool:
    """A query's ``consistency``: with a read replica, ``HIGHER_CONSISTENCY`` reads as of
    the primary; the others accept the replica's lag (``service.fga.engine``)."""
    if raw is None or raw == "":
        return False
    if raw not in CONSISTENCY:
        raise validation(f"invalid consistency: must be one of {', '.join(CONSISTENCY)}")
    return bool(raw == "HIGHER_CONSISTENCY")


def rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def page_size(raw: Any) -> int:
    """OpenFGA's rule: absent is the default; outside 1..100 is refused."""
    if raw is None or raw == "" or raw == 0:
        return DEFAULT_PAGE_SIZE
    try:
        size = int(raw)
    except (TypeError, ValueError):
        raise validation("invalid page_size") from None
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise validation(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
    return size


def _text(raw: Mapping[str, Any], name: str, *, required: bool) -> str:
    value = raw.get(name)
    if value is None or value == "":
        if required:
            raise validation(f"invalid TupleKey: {name} is required")
        return ""
    if not isinstance(value, str):
        raise validation(f"invalid TupleKey: {name} must be a string")
    if (why := too_long(name, len(value))) is not None:
        raise validation(why)
    return value


def tuple_key(raw: Any, *, parts: tuple[str, ...] = ("user", "relation", "object")) -> TupleKey:
    """``{user, relation, object, condition?{name, context?}}``; ``parts`` must be present."""
    if not isinstance(raw, Mapping):
        raise validation("invalid TupleKey: expected an object")
    user, relation, obj = (
        _text(raw, name, required=name in parts) for name in ("user", "relation", "object")
    )
    condition = raw.get("condition")
    if condition is None:
        return TupleKey(obj, relation, user)
    if not isinstance(condition, Mapping) or not isinstance(condition.get("name"), str):
        raise validation("invalid condition: name is required")
    context = condition.get("context")
    if context is not None and not isinstance(context, Mapping):
        raise validation("invalid condition: context must be an object")
    name = condition["name"]
    if (why := too_long("condition_name", len(name))) is not None:
        raise validation(why)
    return TupleKey(obj, relation, user, name, None if context is None else dict(context))


def tuple_keys(raw: Any, where: str) -> list[TupleKey]:
    """A list of tuple keys, or ``{tuple_keys: [...]}`` as OpenFGA wraps most of them."""
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        raw = raw.get("tuple_keys") or []
    if not isinstance(raw, list):
        raise validation(f"{where} must be a list of tuple keys")
    if len(raw) > MAX_TUPLES_PER_WRITE:
        raise validation(f"{where}: at most {MAX_TUPLES_PER_WRITE} tuples")
    return [tuple_key(t) for t in raw]


def context_of(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise validation("context must be an object")
    if (problem := context_problem(raw)) is not None:
        raise validation(problem)
    return dict(raw)


def tuple_json(key: TupleKey) -> dict[str, Any]:
    out: dict[str, Any] = {"user": key.user, "relation": key.relation, "object": key.object}
    if key.condition:
        out["condition"] = {"name": key.condition, "context": dict(key.context or {})}
    return out


def user_json(user: str) -> dict[str, Any]:
    """ListUsers' typed user: an object, a userset ``type:id#rel`` or a wildcard ``type:*``."""
    object_part, _, relation = user.partition("#")
    user_type, _, user_id = object_part.partition(":")
    if relation:
        return {"userset": {"type": user_type, "id": user_id, "relation": relation}}
    if user_id == "*":
        return {"wildcard": {"type": user_type}}
    return {"object": {"type": user_type, "id": user_id}}
