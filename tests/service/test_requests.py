"""Typed requests at the service boundary: one reading of the wire whatever surface
parsed it, every service operation declaring its request dataclass."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from bastion.core.errors import InvalidArgument
from bastion.core.limits import TEXT_LIMITS
from bastion.core.pagination import Page
from bastion.service.access import Service
from bastion.service.admin.audit import AuditLogAdmin
from bastion.service.admin.email_templates import EmailTemplateAdmin
from bastion.service.admin.requests import AuditLogsRequest, UpdateWebhookRequest
from bastion.service.admin.users import UserAdmin
from bastion.service.admin.webhooks import WebhookAdmin
from bastion.service.auth.requests import SessionRequest, SignupRequest, VerifyOtpRequest
from bastion.service.auth.service import AuthService
from bastion.service.fga.requests import ReadTuplesRequest, parse_tuples
from bastion.service.fga.service import FgaService
from bastion.service.requests import _plan, bind, decode, request_schema, request_type

SIGNUP = {
    "email": "ann@example.com",
    "password": "Secret-123",
    "confirm_password": "Secret-123",
    "roles": ["user"],
    "app_data": {"plan": "pro"},
    "is_multi_factor_auth_enabled": True,
    "not_a_field": "ignored",
}


def test_rest_graphql_and_grpc_shapes_give_one_request() -> None:
    rest = decode(SignupRequest, SIGNUP)
    # gRPC's MessageToDict wraps maps as {"value": {...}} and leaves out empty strings.
    grpc = decode(SignupRequest, {**SIGNUP, "app_data": {"value": {"plan": "pro"}}})
    assert rest == grpc
    assert rest.email == "ann@example.com"
    assert rest.roles == ("user",)
    assert rest.phone_number is None
    assert rest.app_data == {"plan": "pro"}


def test_empty_text_is_absent_for_optional_fields_and_kept_for_admin_ones() -> None:
    assert decode(SignupRequest, {"email": ""}).email is None
    assert decode(UpdateWebhookRequest, {"event_description": ""}).event_description == ""
    assert decode(UpdateWebhookRequest, {}).event_description is None


def test_a_boolean_keeps_its_default_when_absent() -> None:
    assert decode(VerifyOtpRequest, {}).is_totp is False
    assert decode(VerifyOtpRequest, {"is_totp": True}).is_totp is True


def test_integers_accept_grpcs_int64_strings() -> None:
    assert decode(AuditLogsRequest, {"from_timestamp": "17"}).from_timestamp == 17
    assert decode(AuditLogsRequest, {"from_timestamp": 17}).from_timestamp == 17
    assert decode(AuditLogsRequest, {}).pagination == Page()


@pytest.mark.parametrize(
    ("kind", "wire", "message"),
    [
        (SignupRequest, {"email": 3}, "email must be a string"),
        (SignupRequest, {"roles": "user"}, "roles must be a list of strings"),
        (SignupRequest, {"app_data": [1]}, "app_data must be an object"),
        (VerifyOtpRequest, {"is_totp": "yes"}, "is_totp must be a boolean"),
        (AuditLogsRequest, {"to_timestamp": 1.5}, "to_timestamp must be an integer"),
        (AuditLogsRequest, {"pagination": {"page": 0}}, "pagination.page must be between"),
        (SessionRequest, {"required_relations": [{}]}, "each required relation needs"),
        (UpdateWebhookRequest, {"headers": {"Host": "x"}}, "headers: Host is set by the server"),
    ],
)
def test_a_bad_field_is_refused_with_its_name(
    kind: type[object], wire: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        decode(kind, wire)


def test_the_engines_text_fields_are_stripped() -> None:
    assert decode(ReadTuplesRequest, {"relation": " viewer "}).relation == "viewer"


FACADES = (Service, AuthService, FgaService, UserAdmin, WebhookAdmin, EmailTemplateAdmin,
           AuditLogAdmin)  # fmt: skip


def _operations() -> list[tuple[str, object]]:
    found = []
    for cls in FACADES:
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction):
            if "request" in inspect.signature(member).parameters and not name.startswith("_"):
                found.append((f"{cls.__name__}.{name}", member))
    return found


def test_every_service_operation_declares_a_request_dataclass() -> None:
    operations = dict(_operations())
    assert {"AuthService.login", "FgaService.check_permissions", "UserAdmin.update_user",
            "Service.admin_login"} <= set(operations)  # fmt: skip
    for name, operation in operations.items():
        assert dataclasses.is_dataclass(request_type(operation)), name  # type: ignore[arg-type]


def test_every_text_field_of_every_operation_declares_its_limit() -> None:
    """Strings and lists of strings: each wire name is in the one table."""
    undeclared = set()
    for name, operation in _operations():
        for field in _plan(request_type(operation)):  # type: ignore[arg-type]
            kind = field.schema.get("type")
            items = field.schema.get("items", {}).get("type")
            if "string" in (kind, items) and field.wire_name not in TEXT_LIMITS:
                undeclared.add(f"{name}: {field.wire_name}")
    assert not undeclared


@pytest.mark.parametrize(
    ("kind", "field", "value"),
    [
        (SignupRequest, "given_name", "g" * 257),
        (SignupRequest, "nickname", "n" * 5000),
        (SignupRequest, "roles", ["user", "r" * 257]),
        (SignupRequest, "app_data", {"k": "v" * 16000}),
        (UpdateWebhookRequest, "headers", {"X-A": "h" * 9000}),
        (ReadTuplesRequest, "object", "doc:" + "o" * 600),
    ],
)
def test_a_value_past_its_declared_limit_is_refused_naming_field_and_limit(
    kind: type[object], field: str, value: object
) -> None:
    limit = TEXT_LIMITS[field]
    with pytest.raises(InvalidArgument, match=f"^{field} is longer than the limit of {limit} "):
        decode(kind, {field: value})
    at_limit = "x" * limit if isinstance(value, str) else None
    if at_limit is not None:
        assert getattr(decode(kind, {field: at_limit}), field) == at_limit


@pytest.mark.parametrize(
    ("part", "value", "field"),
    [
        ("object", "doc:" + "o" * 600, "object"),
        ("relation", "r" * 51, "relation"),
        ("user", "u" * 510, "user"),  # 515 characters as ``user:<id>``
        ("condition", {"name": "c" * 257}, "condition_name"),
    ],
)
def test_a_tuple_part_past_its_column_is_refused(part: str, value: object, field: str) -> None:
    tuple_key = {"user": "user:ann", "relation": "viewer", "object": "doc:1", part: value}
    with pytest.raises(InvalidArgument, match=f"^{field} is longer than the limit of "):
        parse_tuples([tuple_key])


def test_the_documented_schema_follows_the_request() -> None:
    schema = request_schema(SignupRequest)
    roles = {"type": "array", "items": {"type": "string", "maxLength": TEXT_LIMITS["roles"]}}
    assert schema["properties"]["roles"] == roles
    assert schema["properties"]["given_name"] == {"type": "string", "maxLength": 256}
    assert schema["properties"]["is_multi_factor_auth_enabled"] == {"type": "boolean"}
    assert set(schema["properties"]) == {f.name for f in dataclasses.fields(SignupRequest)}


async def test_bind_decodes_before_the_operation_runs() -> None:
    seen: list[object] = []

    class Facade:
        async def signup(self, request: SignupRequest, caller: object) -> object:
            seen.append(request)
            return "reply"

    bound = bind(Facade().signup)  # type: ignore[arg-type]
    assert bound.request_type is SignupRequest
    assert await bound(SIGNUP, None) == "reply"  # type: ignore[arg-type]
    assert seen == [decode(SignupRequest, SIGNUP)]
