"""``to_message`` builds the message ``json_format.ParseDict`` builds, or fails as it does."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from bastion.transports.grpc import messages
from bastion.transports.grpc.messages import to_message
from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, authorizer_pb2, types_pb2

_SAMPLES: dict[int, Any] = {
    FieldDescriptor.CPPTYPE_STRING: "text",
    FieldDescriptor.CPPTYPE_BOOL: True,
    FieldDescriptor.CPPTYPE_INT32: -7,
    FieldDescriptor.CPPTYPE_INT64: 1_700_000_000_123,
    FieldDescriptor.CPPTYPE_UINT32: 7,
    FieldDescriptor.CPPTYPE_UINT64: 9,
    FieldDescriptor.CPPTYPE_DOUBLE: 0.5,
    FieldDescriptor.CPPTYPE_FLOAT: 0.25,
}


def _body(descriptor: Descriptor, depth: int = 0) -> dict[str, Any]:
    """A reply body that sets every field of the message (nested ones to depth 3)."""
    body: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.message_type is None:
            value: Any = _SAMPLES.get(field.cpp_type, "other")
        elif field.message_type.full_name == "google.protobuf.Struct":
            value = {"a": 1, "b": [True, None, "x", {"c": 2.5}], "d": {}}
        elif depth < 3:
            value = _body(field.message_type, depth + 1)
        else:
            continue
        body[field.name] = [value, value] if field.is_repeated else value
    return body


def _all_messages() -> list[type[Message]]:
    found = []
    for module in (authorizer_pb2, admin_pb2, types_pb2):
        for name in module.DESCRIPTOR.message_types_by_name:
            found.append(getattr(module, name))
    return found


def _parse_dict(body: dict[str, Any], cls: type[Message]) -> Message:
    return json_format.ParseDict(body, cls(), ignore_unknown_fields=True)


@pytest.mark.parametrize("cls", _all_messages(), ids=lambda cls: cls.DESCRIPTOR.name)
def test_every_message_filled_whole_is_parse_dicts(cls: type[Message]) -> None:
    body = _body(cls.DESCRIPTOR)
    built, expected = to_message(body, cls), _parse_dict(body, cls)
    assert built == expected
    assert built.SerializeToString(deterministic=True) == expected.SerializeToString(
        deterministic=True
    )


def test_the_fast_path_fills_the_hot_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    """No fallback for what ValidateJwtToken and CheckPermissions answer."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("ParseDict was used")

    claims = {"sub": "u1", "exp": 1_700_000_000, "roles": ["user"], "nested": {"k": None}}
    valid = {"is_valid": True, "claims": {"value": claims}}
    checks = {"results": [{"relation": "viewer", "object": "document:d1", "allowed": True}]}
    expected = [
        _parse_dict(valid, authorizer_pb2.ValidateJwtTokenResponse),
        _parse_dict(checks, authorizer_pb2.CheckPermissionsResponse),
    ]
    monkeypatch.setattr(messages.json_format, "ParseDict", refused)
    built = [
        to_message(valid, authorizer_pb2.ValidateJwtTokenResponse),
        to_message(checks, authorizer_pb2.CheckPermissionsResponse),
    ]
    assert built == expected


@pytest.mark.parametrize(
    "body",
    [
        {"is_valid": True, "unknown": {"x": 1}},  # unknown keys are ignored
        {"is_valid": None, "claims": None},  # null clears
        {"claims": {}},  # an empty message is still set
        {"claims": {"value": {}}},
        {"isValid": True},  # the JSON name
        {"is_valid": 1},  # ParseDict refuses an int for a bool
        {"is_valid": "true"},
        {"claims": {"value": {"when": object()}}},  # not JSON
        {"claims": []},
        {"claims": {"value": []}},
    ],
)
def test_edge_values_are_parse_dicts_answer_or_error(body: dict[str, Any]) -> None:
    cls = authorizer_pb2.ValidateJwtTokenResponse
    try:
        expected: Message | str = _parse_dict(body, cls)
    except json_format.ParseError as error:
        expected = str(error)
    try:
        built: Message | str = to_message(body, cls)
    except json_format.ParseError as error:
        built = str(error)
    assert built == expected
    if isinstance(built, authorizer_pb2.ValidateJwtTokenResponse):
        assert isinstance(expected, authorizer_pb2.ValidateJwtTokenResponse)
        assert built.HasField("claims") == expected.HasField("claims")


@pytest.mark.parametrize(
    "results",
    [
        [{"relation": "viewer", "allowed": 1}],  # int for a bool
        [None],  # null in a list of messages
        [{"relation": 5}],
        "not a list",
    ],
)
def test_refused_lists_fail_as_parse_dict_does(results: object) -> None:
    cls = authorizer_pb2.CheckPermissionsResponse
    with pytest.raises(json_format.ParseError) as expected:
        _parse_dict({"results": results}, cls)
    with pytest.raises(json_format.ParseError) as raised:
        to_message({"results": results}, cls)
    assert str(raised.value) == str(expected.value)
