"""OpenFGA's authorization model as its SQL stores keep it: the protobuf message
``openfga.v1.AuthorizationModel`` (column ``serialized_protobuf``; before OpenFGA's
migration 004, one ``openfga.v1.TypeDefinition`` a row in ``type_definition``).

The message types are declared here from the field numbers of OpenFGA's published schema
(``openfga/v1/authzmodel.proto`` in openfga/api: facts of the wire format, no generated
code), as much of them as a model needs; a decoded message becomes the model's JSON form,
which :func:`bastion.core.fga.model.model_from_json` reads. Fields this subset does not
declare are skipped by the protobuf runtime, never misread.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, Message
from google.protobuf.struct_pb2 import Struct

__all__ = ["decode_context", "decode_model", "decode_type_definition", "encode_model"]

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _MESSAGE, _ENUM = _F.TYPE_STRING, _F.TYPE_MESSAGE, _F.TYPE_ENUM
_ONE, _MANY = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

#: message -> fields (name, number, type, label, message type or None, oneof index or None)
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None, int | None]]] = {
    "AuthorizationModel": [
        ("id", 1, _STRING, _ONE, None, None),
        ("schema_version", 2, _STRING, _ONE, None, None),
        ("type_definitions", 3, _MESSAGE, _MANY, "TypeDefinition", None),
        ("conditions", 4, _MESSAGE, _MANY, "AuthorizationModel.ConditionsEntry", None),
    ],
    "TypeDefinition": [
        ("type", 1, _STRING, _ONE, None, None),
        ("relations", 2, _MESSAGE, _MANY, "TypeDefinition.RelationsEntry", None),
        ("metadata", 3, _MESSAGE, _ONE, "Metadata", None),
    ],
    "Metadata": [
        ("relations", 1, _MESSAGE, _MANY, "Metadata.RelationsEntry", None),
        ("module", 2, _STRING, _ONE, None, None),
        ("source_info", 3, _MESSAGE, _ONE, "SourceInfo", None),
    ],
    "SourceInfo": [("file", 1, _STRING, _ONE, None, None)],
    "RelationMetadata": [
        ("directly_related_user_types", 1, _MESSAGE, _MANY, "RelationReference", None),
        ("module", 2, _STRING, _ONE, None, None),
        ("source_info", 3, _MESSAGE, _ONE, "SourceInfo", None),
    ],
    "RelationReference": [
        ("type", 1, _STRING, _ONE, None, None),
        ("relation", 2, _STRING, _ONE, None, 0),
        ("wildcard", 3, _MESSAGE, _ONE, "Wildcard", 0),
        ("condition", 4, _STRING, _ONE, None, None),
    ],
    "Wildcard": [],
    "Usersets": [("child", 1, _MESSAGE, _MANY, "Userset", None)],
    "Difference": [
        ("base", 1, _MESSAGE, _ONE, "Userset", None),
        ("subtract", 2, _MESSAGE, _ONE, "Userset", None),
    ],
    "Userset": [
        ("this", 1, _MESSAGE, _ONE, "DirectUserset", 0),
        ("computed_userset", 2, _MESSAGE, _ONE, "ObjectRelation", 0),
        ("tuple_to_userset", 3, _MESSAGE, _ONE, "TupleToUserset", 0),
        ("union", 4, _MESSAGE, _ONE, "Usersets", 0),
        ("intersection", 5, _MESSAGE, _ONE, "Usersets", 0),
        ("difference", 6, _MESSAGE, _ONE, "Difference", 0),
    ],
    "DirectUserset": [],
    "ObjectRelation": [
        ("object", 1, _STRING, _ONE, None, None),
        ("relation", 2, _STRING, _ONE, None, None),
    ],
    "TupleToUserset": [
        ("tupleset", 1, _MESSAGE, _ONE, "ObjectRelation", None),
        ("computed_userset", 2, _MESSAGE, _ONE, "ObjectRelation", None),
    ],
    "Condition": [
        ("name", 1, _STRING, _ONE, None, None),
        ("expression", 2, _STRING, _ONE, None, None),
        ("parameters", 3, _MESSAGE, _MANY, "Condition.ParametersEntry", None),
        ("metadata", 4, _MESSAGE, _ONE, "ConditionMetadata", None),
    ],
    "ConditionMetadata": [
        ("module", 1, _STRING, _ONE, None, None),
        ("source_info", 2, _MESSAGE, _ONE, "SourceInfo", None),
    ],
    "ConditionParamTypeRef": [
        ("type_name", 1, _ENUM, _ONE, "ConditionParamTypeRef.TypeName", None),
        ("generic_types", 2, _MESSAGE, _MANY, "ConditionParamTypeRef", None),
    ],
}
#: map fields: (message, entry name) -> value message
_MAPS = {
    ("AuthorizationModel", "ConditionsEntry"): "Condition",
    ("TypeDefinition", "RelationsEntry"): "Userset",
    ("Metadata", "RelationsEntry"): "RelationMetadata",
    ("Condition", "ParametersEntry"): "ConditionParamTypeRef",
}
_TYPE_NAMES = (
    "UNSPECIFIED", "ANY", "BOOL", "STRING", "INT", "UINT", "DOUBLE", "DURATION", "TIMESTAMP",
    "MAP", "LIST", "IPADDRESS",
)  # fmt: skip
#: fields OpenFGA's schema names in JSON as in the message (``json_name``); the others take
#: protobuf's lowerCamelCase (``computedUserset``), as OpenFGA's JSON models do
_SNAKE_IN_JSON = frozenset(
    {"schema_version", "type_definitions", "directly_related_user_types", "source_info",
     "type_name", "generic_types"}
)  # fmt: skip
_ONEOFS = {"RelationReference": "relation_or_wildcard", "Userset": "userset"}


def _field(
    name: str, number: int, kind: int, label: int, type_name: str | None, oneof: int | None
) -> descriptor_pb2.FieldDescriptorProto:
    field = descriptor_pb2.FieldDescriptorProto(name=name, number=number, type=kind, label=label)
    if name in _SNAKE_IN_JSON:
        field.json_name = name
    if type_name is not None:
        field.type_name = f".openfga.v1.{type_name}"
    if oneof is not None:
        field.oneof_index = oneof
    return field


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="bastion/openfga_authzmodel_subset.proto", package="openfga.v1", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        message.field.extend(_field(*spec) for spec in fields)
        if name in _ONEOFS:
            message.oneof_decl.add(name=_ONEOFS[name])
        for (owner, entry), value in _MAPS.items():
            if owner == name:
                nested = message.nested_type.add(name=entry)
                nested.options.map_entry = True
                nested.field.extend([
                    _field("key", 1, _STRING, _ONE, None, None),
                    _field("value", 2, _MESSAGE, _ONE, value, None),
                ])  # fmt: skip
        if name == "ConditionParamTypeRef":
            enum = message.enum_type.add(name="TypeName")
            for number, value in enumerate(_TYPE_NAMES):
                enum.value.add(name=f"TYPE_NAME_{value}", number=number)
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _class(name: str) -> type[Message]:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"openfga.v1.{name}"))


_MODEL, _TYPE_DEFINITION = _class("AuthorizationModel"), _class("TypeDefinition")


def _as_json(message: Message) -> dict[str, Any]:
    return json_format.MessageToDict(message)


def decode_model(raw: bytes) -> dict[str, Any]:
    """An ``AuthorizationModel`` message as OpenFGA's JSON form; ValueError if malformed."""
    try:
        return _as_json(_MODEL.FromString(raw))
    except DecodeError as exc:
        raise ValueError(f"not an OpenFGA authorization model: {exc}") from None


def decode_type_definition(raw: bytes) -> dict[str, Any]:
    """One ``TypeDefinition`` message (OpenFGA's stores before its migration 004)."""
    try:
        return _as_json(_TYPE_DEFINITION.FromString(raw))
    except DecodeError as exc:
        raise ValueError(f"not an OpenFGA type definition: {exc}") from None


def encode_model(model: dict[str, Any]) -> bytes:
    """OpenFGA's JSON form as the message its stores keep (what a test database holds)."""
    return json_format.ParseDict(model, _MODEL()).SerializeToString()


def decode_context(raw: bytes | None) -> dict[str, Any] | None:
    """A tuple's condition context (a ``google.protobuf.Struct``) as a JSON object."""
    if not raw:
        return None
    try:
        return json_format.MessageToDict(Struct.FromString(raw))
    except DecodeError as exc:
        raise ValueError(f"not a condition context: {exc}") from None
