"""The super-admin operations' requests: one frozen dataclass per operation, read from the
wire by :mod:`service.requests`. A text field here keeps ``""`` (an admin may clear a
field) and is None only when absent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bastion.core.errors import InvalidArgument
from bastion.core.pagination import Page, parse_pagination
from bastion.service.requests import present_text, wire

__all__ = [
    "AddEmailTemplateRequest",
    "AddWebhookRequest",
    "AuditLogsRequest",
    "DeleteUserRequest",
    "IdRequest",
    "InviteMembersRequest",
    "ListRequest",
    "ListUsersRequest",
    "TestEndpointRequest",
    "UpdateEmailTemplateRequest",
    "UpdateUserRequest",
    "UpdateWebhookRequest",
    "UserAccessRequest",
    "UserRequest",
    "WebhookLogsRequest",
    "headers",
]

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


def headers(wire_form: Mapping[str, Any], name: str) -> dict[str, str] | None:
    value = wire_form.get(name)
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


def _pagination(wire_form: Mapping[str, Any], name: str) -> Page:
    """``{"pagination": {"page", "limit"}}`` (Authorizer 2.3) or, when that is absent,
    ``page`` and ``limit`` at the top (Authorizer's newer ``PaginationRequest``)."""
    if wire_form.get(name) is None and ("page" in wire_form or "limit" in wire_form):
        return parse_pagination({"page": wire_form.get("page"), "limit": wire_form.get("limit")})
    return parse_pagination(wire_form.get(name))


_PAGINATION_SCHEMA = {
    "type": "object",
    "properties": {"page": {"type": "integer"}, "limit": {"type": "integer"}},
}
_HEADERS_SCHEMA = {"type": "object", "additionalProperties": {"type": "string"}}


def text_field() -> Any:
    return wire(read=present_text, schema={"type": "string"})


def page_field() -> Any:
    return wire(read=_pagination, schema=_PAGINATION_SCHEMA, default=Page())


def headers_field() -> Any:
    return wire(read=headers, schema=_HEADERS_SCHEMA)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListRequest:
    pagination: Page = page_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListUsersRequest:
    pagination: Page = page_field()
    #: keeps the users whose email, given name, family name or nickname contains it
    query: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IdRequest:
    id: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRequest:
    id: str | None = text_field()
    email: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteUserRequest:
    email: str | None = text_field()
    id: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class UserAccessRequest:
    user_id: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateUserRequest:
    id: str | None = text_field()
    given_name: str | None = text_field()
    family_name: str | None = text_field()
    middle_name: str | None = text_field()
    nickname: str | None = text_field()
    gender: str | None = text_field()
    birthdate: str | None = text_field()
    picture: str | None = text_field()
    #: checked by the operation against the configured roles
    roles: Any = wire(schema={"type": "array", "items": {"type": "string"}})
    app_data: Any = wire(schema={"type": "object"})
    email: str | None = text_field()
    phone_number: str | None = text_field()
    email_verified: bool | None = None
    phone_number_verified: bool | None = None
    is_multi_factor_auth_enabled: bool | None = None
    reset_mfa: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InviteMembersRequest:
    #: checked by the operation (after whether invitations can be sent at all)
    emails: Any = wire(schema={"type": "array", "items": {"type": "string"}})
    redirect_uri: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AddWebhookRequest:
    event_name: str | None = text_field()
    endpoint: str | None = text_field()
    event_description: str | None = text_field()
    enabled: bool | None = None
    headers: dict[str, str] | None = headers_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateWebhookRequest:
    id: str | None = text_field()
    event_name: str | None = text_field()
    event_description: str | None = text_field()
    endpoint: str | None = text_field()
    enabled: bool | None = None
    headers: dict[str, str] | None = headers_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookLogsRequest:
    pagination: Page = page_field()
    webhook_id: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class TestEndpointRequest:
    event_name: str | None = text_field()
    endpoint: str | None = text_field()
    event_description: str | None = text_field()
    headers: dict[str, str] | None = headers_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddEmailTemplateRequest:
    event_name: str | None = text_field()
    subject: str | None = text_field()
    template: str | None = text_field()
    design: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateEmailTemplateRequest:
    id: str | None = text_field()
    event_name: str | None = text_field()
    subject: str | None = text_field()
    template: str | None = text_field()
    design: str | None = text_field()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditLogsRequest:
    pagination: Page = page_field()
    action: str | None = text_field()
    actor_id: str | None = text_field()
    resource: str | None = text_field()
    resource_type: str | None = text_field()
    resource_id: str | None = text_field()
    from_timestamp: int | None = None
    to_timestamp: int | None = None
