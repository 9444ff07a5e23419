"""Typed requests at the service boundary.

Every service operation takes one frozen dataclass (its request) and the caller. A
transport hands the wire form it parsed (a JSON body, GraphQL's ``params``, a protobuf
message as a mapping) to the operation through :func:`bind`, which builds the request with
:func:`decode`. The dataclass's field types say how each field is read, so REST, GraphQL
and gRPC cannot hand the service different shapes, and a field's validation lives in one
place:

=======================  ===================================================================
field type               read as
=======================  ===================================================================
``str``                  a string; absent or null is ``""``
``str | None``           a string; absent, null and ``""`` are None
``bool | None``          a boolean, or None
``int | None``           an integer (gRPC's JSON mapping writes int64 as a string), or None
``tuple[str, ...]``      a list of strings; absent is ``()``
``dict[str, Any] | None`` an object (gRPC's ``{"value": {...}}`` wrapper undone), or None
``Any``                  the value as sent: the operation parses what has a shape of its own
=======================  ===================================================================

A field named in :data:`core.limits.TEXT_LIMITS` is refused past its limit: a string by
its length, a list by each string item's, an object by its JSON text's.

:func:`wire` overrides a field's wire name or reader.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from bastion.core.errors import InvalidArgument
from bastion.core.limits import TEXT_LIMITS, too_long
from bastion.service import tracing
from bastion.service.context import CallerContext, Reply

__all__ = [
    "Bound",
    "EmptyRequest",
    "ServiceOperation",
    "WireOperation",
    "bind",
    "decode",
    "flag",
    "integer",
    "mapping",
    "optional_text",
    "present_text",
    "request_schema",
    "request_type",
    "strings",
    "text",
    "wire",
]

R = TypeVar("R")
Reader = Callable[[Mapping[str, Any], str], Any]
WireOperation = Callable[[Mapping[str, Any], CallerContext], Awaitable[Reply]]
#: A service operation: its request dataclass and the caller -> the reply.
ServiceOperation = Callable[[Any, CallerContext], Awaitable[Reply]]


# -- readers: (wire mapping, field name) -> value, or InvalidArgument naming the field ------


def text(wire: Mapping[str, Any], name: str) -> str:
    value = wire.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string")
    return value


def optional_text(wire: Mapping[str, Any], name: str) -> str | None:
    return text(wire, name) or None


def present_text(wire: Mapping[str, Any], name: str) -> str | None:
    """A string, ``""`` kept (an admin clearing a field); None only when absent or null."""
    if wire.get(name) is None:
        return None
    return text(wire, name)


def strings(wire: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = wire.get(name)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgument(f"{name} must be a list of strings")
    return tuple(value)


def flag(wire: Mapping[str, Any], name: str) -> bool | None:
    value = wire.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a boolean")
    return value


def integer(wire: Mapping[str, Any], name: str) -> int | None:
    value = wire.get(name)
    if value is None:
        return None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)  # gRPC's JSON mapping writes int64 as a string
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer")
    return value


def mapping(wire: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """A free JSON object (``app_data``); gRPC's ``{"value": {...}}`` wrapper is undone."""
    value = wire.get(name)
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"value"} and isinstance(value["value"], dict):
        value = value["value"]
    if not isinstance(value, dict):
        raise InvalidArgument(f"{name} must be an object")
    return dict(value)


def _raw(wire: Mapping[str, Any], name: str) -> Any:
    return wire.get(name)


_BY_TYPE: dict[Any, tuple[Reader, dict[str, Any]]] = {
    str: (text, {"type": "string"}),
    str | None: (optional_text, {"type": "string"}),
    bool | None: (flag, {"type": "boolean"}),
    bool: (flag, {"type": "boolean"}),
    int | None: (integer, {"type": "integer"}),
    tuple[str, ...]: (strings, {"type": "array", "items": {"type": "string"}}),
    dict[str, Any] | None: (mapping, {"type": "object"}),
    Any: (_raw, {}),
}


def wire(
    *,
    name: str | None = None,
    read: Reader | None = None,
    schema: dict[str, Any] | None = None,
    default: Any = None,
) -> Any:
    """A request field whose wire name, reader or documented schema is not its type's."""
    metadata: dict[str, Any] = {}
    if name is not None:
        metadata["wire"] = name
    if read is not None:
        metadata["read"] = read
    if schema is not None:
        metadata["schema"] = schema
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EmptyRequest:
    """The request of an operation that reads nothing but its caller."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    attribute: str
    wire_name: str
    read: Reader
    schema: dict[str, Any]
    #: absent from the wire: keep the dataclass default (a ``bool`` field)
    keep_default: bool


_PLANS: dict[type[Any], tuple[_Field, ...]] = {}


def _plan(kind: type[Any]) -> tuple[_Field, ...]:
    """How to read each field of ``kind``, worked out once per request type."""
    plan = _PLANS.get(kind)
    if plan is None:
        plan = _PLANS[kind] = _make_plan(kind)
    return plan


def _make_plan(kind: type[Any]) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(kind)
    plan = []
    for spec in dataclasses.fields(kind):
        annotation = hints[spec.name]
        by_type = _BY_TYPE.get(annotation)
        read = spec.metadata.get("read") or (by_type[0] if by_type else None)
        if read is None:
            raise TypeError(f"{kind.__name__}.{spec.name}: no reader for {annotation!r}")
        schema = spec.metadata.get("schema") or (by_type[1] if by_type else {})
        wire_name = spec.metadata.get("wire", spec.name)
        plan.append(
            _Field(
                spec.name,
                wire_name,
                read,
                _with_limit(schema, TEXT_LIMITS.get(wire_name)),
                keep_default=annotation is bool,
            )
        )
    return tuple(plan)


def _with_limit(schema: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``schema`` documenting ``limit`` where JSON Schema can say it."""
    if limit is None:
        return schema
    if schema.get("type") == "string":
        return {**schema, "maxLength": limit}
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, dict) and items.get("type") == "string":
        return {**schema, "items": {**items, "maxLength": limit}}
    if schema.get("type") == "object":
        return {**schema, "description": f"at most {limit} characters as JSON text"}
    return schema


def _length_refusal(name: str, value: Any) -> str | None:
    """Why ``value`` is too long for field ``name`` (see :mod:`core.limits`), or None."""
    if isinstance(value, str):
        return too_long(name, len(value))
    if isinstance(value, list | tuple):
        longest = max((len(item) for item in value if isinstance(item, str)), default=0)
        return too_long(name, longest)
    if isinstance(value, dict):
        return too_long(name, len(json.dumps(value)))
    return None


def decode(kind: type[R], wire_form: Mapping[str, Any]) -> R:
    """``kind`` built from a wire mapping, each field read by its type (unknown fields are
    ignored, as Authorizer does)."""
    values = {}
    for field in _plan(kind):
        value = field.read(wire_form, field.wire_name)
        if (why := _length_refusal(field.wire_name, value)) is not None:
            raise InvalidArgument(why)
        if value is None and field.keep_default:
            continue
        values[field.attribute] = value
    return kind(**values)


def request_schema(kind: type[Any]) -> dict[str, Any]:
    """The JSON Schema of ``kind``'s wire form (for /openapi.json)."""
    return {
        "type": "object",
        "properties": {f.wire_name: f.schema for f in _plan(kind)},
    }


def request_type(operation: Callable[..., Awaitable[Reply]]) -> type[Any]:
    """The request dataclass a service operation declares for its first parameter."""
    function = getattr(operation, "__func__", operation)
    kind = typing.get_type_hints(function)["request"]
    if not dataclasses.is_dataclass(kind):
        raise TypeError(f"{function.__qualname__}: request must be a request dataclass")
    return typing.cast(type[Any], kind)


@dataclasses.dataclass(frozen=True, slots=True)
class Bound:
    """A service operation as the transports call it: with the wire mapping they parsed."""

    operation: ServiceOperation
    request_type: type[Any]
    #: its span's name when traced (``AuthService.login``)
    name: str

    async def __call__(self, wire_form: Mapping[str, Any], caller: CallerContext) -> Reply:
        with tracing.span(self.name):
            return await self.operation(decode(self.request_type, wire_form), caller)


def bind(operation: ServiceOperation) -> Bound:
    return Bound(operation, request_type(operation), operation.__qualname__)
