"""A reply body (what REST answers as JSON) into its protobuf message, fast.

``json_format.ParseDict`` walks the descriptor anew for every field of every reply: 30 us
for a ValidateJwtToken reply with a dozen claims, 7% of a call's CPU. :func:`to_message`
fills the message from a plan made once per message type, for the shapes bastion's
replies take (scalars, lists, nested messages, ``google.protobuf.Struct``), and only when
every value has the exact Python type the field takes. Anything else (a camelCase key,
a value ParseDict would convert or refuse) starts again with ParseDict, so the message,
or the error, is always ParseDict's with ``ignore_unknown_fields``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)

_INT = (int,)
#: A scalar field's C++ type -> the exact Python types ParseDict takes as they are.
_EXACT: dict[int, tuple[type, ...]] = {
    FieldDescriptor.CPPTYPE_STRING: (str,),
    FieldDescriptor.CPPTYPE_BOOL: (bool,),
    FieldDescriptor.CPPTYPE_INT32: _INT,
    FieldDescriptor.CPPTYPE_INT64: _INT,
    FieldDescriptor.CPPTYPE_UINT32: _INT,
    FieldDescriptor.CPPTYPE_UINT64: _INT,
    FieldDescriptor.CPPTYPE_DOUBLE: (int, float),
    FieldDescriptor.CPPTYPE_FLOAT: (int, float),
}
_STRUCT = "google.protobuf.Struct"


class _ParseDictInstead(Exception):
    """A value the plan does not cover: ParseDict decides."""


@dataclass(frozen=True, slots=True)
class _Field:
    repeated: bool
    #: Python types of a scalar field; None for a message field.
    exact: tuple[type, ...] | None
    #: The nested message's plan; None for a scalar or a Struct.
    nested: dict[str, _Field | None] | None
    struct: bool


#: A message type's plan: each field's name and JSON name -> how to fill it (None: as
#: ParseDict does, by starting again with it). Only whole plans are published here.
_PLANS: dict[str, dict[str, _Field | None]] = {}
_PLANNING = threading.Lock()


def _plan(descriptor: Descriptor) -> dict[str, _Field | None]:
    if (plan := _PLANS.get(descriptor.full_name)) is None:
        with _PLANNING:
            building: dict[str, dict[str, _Field | None]] = {}
            plan = _build(descriptor, building)
            _PLANS.update(building)
    return plan


def _build(
    descriptor: Descriptor, building: dict[str, dict[str, _Field | None]]
) -> dict[str, _Field | None]:
    name = descriptor.full_name
    if (plan := _PLANS.get(name, building.get(name))) is not None:
        return plan
    plan = building[name] = {}  # before the fields: a message may nest itself
    for field in descriptor.fields:
        plan[field.name] = _field(field, building)
        if field.json_name != field.name:
            plan[field.json_name] = None
    return plan


def _field(field: FieldDescriptor, building: dict[str, dict[str, _Field | None]]) -> _Field | None:
    repeated = field.is_repeated
    oneof = field.containing_oneof
    if oneof is not None and len(oneof.fields) > 1:
        return None  # ParseDict refuses two fields of one oneof
    if field.message_type is None:
        if field.cpp_type not in _EXACT or field.type == FieldDescriptor.TYPE_BYTES:
            return None  # enums by name, base64 bytes
        return _Field(repeated, _EXACT[field.cpp_type], None, struct=False)
    name = field.message_type.full_name
    if name == _STRUCT:
        return None if repeated else _Field(repeated, None, None, struct=True)
    if field.message_type.GetOptions().map_entry or name.startswith("google.protobuf."):
        return None
    return _Field(repeated, None, _build(field.message_type, building), struct=False)


def _fill(message: Message, plan: dict[str, _Field | None], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if key not in plan:
            continue  # unknown: ignored, as ParseDict's ignore_unknown_fields
        field = plan[key]
        if field is None:
            raise _ParseDictInstead
        if value is None:
            continue  # ParseDict clears the field: a new message has it clear
        if field.exact is not None:
            if field.repeated:
                if type(value) is not list or any(type(v) not in field.exact for v in value):
                    raise _ParseDictInstead
                getattr(message, key).extend(value)
            elif type(value) in field.exact:
                setattr(message, key, value)
            else:
                raise _ParseDictInstead
        elif field.repeated:
            if type(value) is not list:
                raise _ParseDictInstead
            items = getattr(message, key)
            for item in value:
                if type(item) is not dict:
                    raise _ParseDictInstead
                _fill(items.add(), field.nested or {}, item)
        elif type(value) is dict:
            sub = getattr(message, key)
            sub.SetInParent()
            if field.struct:
                try:
                    sub.update(value)
                except (ValueError, TypeError):
                    raise _ParseDictInstead from None
            else:
                _fill(sub, field.nested or {}, value)
        else:
            raise _ParseDictInstead


def to_message(data: dict[str, Any], cls: type[M]) -> M:
    """``json_format.ParseDict(data, cls(), ignore_unknown_fields=True)``, fast."""
    message = cls()
    try:
        _fill(message, _plan(cls.DESCRIPTOR), data)
    except _ParseDictInstead:
        return json_format.ParseDict(data, cls(), ignore_unknown_fields=True)
    return message
