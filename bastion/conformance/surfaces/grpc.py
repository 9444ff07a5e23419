"""authorizer.v1 over grpcio with the generated stubs; proto JSON <-> REST dicts.

Requests: the REST dict, with Authorizer's ``AppData`` fields (``app_data``, webhook
``headers``...) wrapped as ``{value: ...}``, parsed into the request message; a field
the proto lacks makes the call unexpressible on gRPC. Responses: set fields only (proto3
has no presence for defaults), ``int64`` as numbers, ``AppData`` unwrapped, and the body
taken out of the wrapping field where Authorizer's message wraps it. Status codes become
snake_case codes; ``set-cookie`` initial metadata are the cookies.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from bastion.conformance.operations import Operation
from bastion.conformance.outcome import (
    Credentials,
    Outcome,
    SetCookie,
    parse_set_cookie,
    snake_case,
)
from bastion.conformance.pacing import BEFORE_EFFECT_MARK, retry_safe_after
from bastion.conformance.surfaces.base import Unexpressible, round_robin
from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
)

APP_DATA = "authorizer.v1.AppData"
_WELL_KNOWN = ("google.protobuf.",)
_SERVICES = {
    "AuthorizerService": (authorizer_pb2, authorizer_pb2_grpc.AuthorizerServiceStub),
    "AuthorizerAdminService": (admin_pb2, admin_pb2_grpc.AuthorizerAdminServiceStub),
}


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def proto_shaped(value: dict[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    """A REST dict with every AppData field wrapped as ``{value: ...}``."""
    shaped = dict(value)
    for name, item in value.items():
        field = descriptor.fields_by_name.get(name)
        if (
            field is not None
            and item == 0
            and isinstance(item, int)
            and not isinstance(item, bool)
            and not field.has_presence
        ):
            raise Unexpressible(f"{name}=0 is indistinguishable from unset in proto3")
        if field is None or field.message_type is None or _is_map(field):
            continue
        if field.message_type.full_name == APP_DATA and isinstance(item, dict):
            shaped[name] = {"value": item}
        elif _repeated(field) and isinstance(item, list):
            shaped[name] = [
                proto_shaped(i, field.message_type) if isinstance(i, dict) else i for i in item
            ]
        elif isinstance(item, dict):
            shaped[name] = proto_shaped(item, field.message_type)
    return shaped


def _plain_value(field: FieldDescriptor, value: Any) -> Any:
    if field.message_type is None:
        if field.type == FieldDescriptor.TYPE_ENUM:
            return field.enum_type.values_by_number[value].name
        return value
    full_name = field.message_type.full_name
    if full_name == APP_DATA:
        return json_format.MessageToDict(value.value) if value.HasField("value") else {}
    if full_name.startswith(_WELL_KNOWN):
        return json_format.MessageToDict(value)
    return plain(value)


def plain(message: Message) -> dict[str, Any]:
    """The set fields of ``message`` as a REST-shaped dict."""
    result: dict[str, Any] = {}
    for field, value in message.ListFields():
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            result[field.name] = {k: _plain_value(value_field, v) for k, v in value.items()}
        elif _repeated(field):
            result[field.name] = [_plain_value(field, v) for v in value]
        else:
            result[field.name] = _plain_value(field, value)
    return result


def _channel(target: str, tls_ca: Path | None) -> grpc.Channel:
    if tls_ca is None:
        return grpc.insecure_channel(target)
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca.read_bytes())
    return grpc.secure_channel(target, credentials)


def _metadata(credentials: Credentials) -> list[tuple[str, str]]:
    metadata: list[tuple[str, str]] = []
    if credentials.bearer:
        metadata.append(("authorization", f"Bearer {credentials.bearer}"))
    if credentials.cookies:
        metadata.append(("cookie", "; ".join(f"{k}={v}" for k, v in credentials.cookies)))
    if credentials.admin_secret is not None:
        metadata.append(("x-service-admin-secret", credentials.admin_secret))
    return metadata


def _cookies(metadata: Sequence[tuple[str, Any]] | None) -> tuple[SetCookie, ...]:
    parsed = (parse_set_cookie(str(v)) for k, v in metadata or () if k.lower() == "set-cookie")
    return tuple(c for c in parsed if c is not None)


class GrpcSurface:
    name = "grpc"

    def __init__(self, targets: Sequence[str], *, tls_ca: Path | None = None) -> None:
        self._channels = [_channel(t, tls_ca) for t in targets]
        self._stubs = [
            {service: stub(channel) for service, (_, stub) in _SERVICES.items()}
            for channel in self._channels
        ]
        self._next = round_robin(self._stubs)

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        module, _ = _SERVICES[operation.grpc_service]
        method = module.DESCRIPTOR.services_by_name[operation.grpc_service].methods_by_name[
            operation.grpc_method
        ]
        request_class = message_factory.GetMessageClass(method.input_type)
        try:
            message = json_format.ParseDict(
                proto_shaped(request, method.input_type), request_class()
            )
        except json_format.ParseError as exc:
            raise Unexpressible(f"not expressible in {method.input_type.name}: {exc}") from None
        stub = next(self._next)[operation.grpc_service]
        rpc = getattr(stub, operation.grpc_method)
        try:
            response, call = rpc.with_call(message, metadata=_metadata(credentials), timeout=30)
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
            details = error.details() or ""  # type: ignore[attr-defined]
            cookies = _cookies(error.initial_metadata())  # type: ignore[attr-defined]
            trailers = dict(error.trailing_metadata() or ())  # type: ignore[attr-defined]
            wait = None
            if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                wait = retry_safe_after(
                    trailers.get("retry-after"), trailers.get(BEFORE_EFFECT_MARK)
                )
            return Outcome(
                ok=False,
                code=snake_case(code.name),
                message=details,
                cookies=cookies,
                offered=code != grpc.StatusCode.UNIMPLEMENTED,
                retry_safe_after=wait,
            )
        body = plain(response)
        if operation.grpc_unwrap is not None:
            body = body.get(operation.grpc_unwrap, {})
        return Outcome(ok=True, body=body, cookies=_cookies(call.initial_metadata()))

    def close(self) -> None:
        for channel in self._channels:
            channel.close()
