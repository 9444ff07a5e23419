"""REST routes and GraphQL root fields of the admin surface; bodies are the service's, bare."""

from __future__ import annotations

from typing import Any

from bastion.core.pagination import MAX_LIMIT
from bastion.service.admin import Admin
from bastion.service.requests import ServiceOperation, bind
from bastion.transports.http.routes import Route

__all__ = ["admin_routes"]

_S: dict[str, Any] = {"type": "string"}
_I: dict[str, Any] = {"type": "integer"}
_B: dict[str, Any] = {"type": "boolean"}
_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
#: Output fields that a record may not have (GraphQL's nullable fields) are null then.
_S0: dict[str, Any] = {"type": ["string", "null"]}
_I0: dict[str, Any] = {"type": ["integer", "null"]}
_B0: dict[str, Any] = {"type": ["boolean", "null"]}
_MAP0: dict[str, Any] = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
_MESSAGE = {"type": "object", "properties": {"message": _S}}
_PAGINATION_IN = {
    "type": "object",
    "description": f"Defaults: page 1, limit 10. page >= 1, 1 <= limit <= {MAX_LIMIT}; "
    "a page past the end is empty.",
    "properties": {"page": {**_I, "minimum": 1}, "limit": {**_I, "minimum": 1, "maximum": 100}},
}
_PAGINATION_OUT = {
    "type": "object",
    "properties": {"page": _I, "limit": _I, "total": _I, "offset": _I},
}


def _object(required: tuple[str, ...] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _listing(name: str, item: dict[str, Any]) -> dict[str, Any]:
    properties = {name: {"type": "array", "items": item}, "pagination": _PAGINATION_OUT}
    return {"type": "object", "properties": properties}


_WEBHOOK = _object(
    id=_S,
    event_name=_S,
    event_description=_S0,
    endpoint=_S,
    enabled=_B0,
    headers=_MAP0,
    created_at=_I,
    updated_at=_I0,
)
_WEBHOOK_LOG = _object(
    id=_S, http_status=_I0, response=_S0, request=_S0, webhook_id=_S0, created_at=_I, updated_at=_I0
)
_EMAIL_TEMPLATE = _object(
    id=_S, event_name=_S, subject=_S, template=_S, design=_S0, created_at=_I, updated_at=_I0
)
_AUDIT_LOG = _object(
    id=_S,
    actor_id=_S0,
    actor_type=_S0,
    actor_email=_S0,
    action=_S,
    resource_type=_S0,
    resource_id=_S0,
    ip_address=_S0,
    user_agent=_S0,
    metadata=_S0,
    created_at=_I,
)
_BY_ID = _object(("id",), id=_S)
_USER = _object(
    id=_S,
    email=_S0,
    email_verified=_B,
    signup_methods=_S,
    given_name=_S0,
    family_name=_S0,
    middle_name=_S0,
    nickname=_S0,
    preferred_username=_S0,
    gender=_S0,
    birthdate=_S0,
    phone_number=_S0,
    phone_number_verified=_B,
    picture=_S0,
    roles={"type": "array", "items": _S},
    created_at=_I0,
    updated_at=_I0,
    revoked_timestamp=_I0,
    is_multi_factor_auth_enabled=_B0,
    app_data={"type": ["object", "null"]},
    has_skipped_mfa_setup_at=_I0,
    mfa_locked_at=_I0,
    enrolled_mfa_methods={"type": "array", "items": _S},
)
_VERIFICATION_REQUEST = _object(
    id=_S,
    identifier=_S0,
    token=_S0,
    email=_S0,
    expires=_I0,
    created_at=_I0,
    updated_at=_I0,
    nonce=_S0,
    redirect_uri=_S0,
)
_USER_ID = _object(("user_id",), user_id=_S)
_SESSION = _object(id=_S, created_at=_I, last_used_at=_I, ip=_S, user_agent=_S, current=_B)


def admin_routes(admin: Admin) -> list[Route]:
    common: dict[str, Any] = {"tag": "admin", "extra_statuses": (401, 404, 409)}
    hooks, templates = admin.webhooks, admin.email_templates

    def post(path: str, operation: ServiceOperation, summary: str, request: dict[str, Any],
             response: dict[str, Any]) -> Route:  # fmt: skip
        return Route(
            method="POST",
            path=f"/v1/admin/{path}",
            operation=bind(operation),
            summary=summary,
            request_schema=request,
            response_schema=response,
            **common,
        )

    users = admin.users
    return [
        post(
            "users",
            users.users,
            "Users, newest first; query keeps those whose email or names contain it",
            _object(pagination=_PAGINATION_IN, query=_S),
            _listing("users", _USER),
        ),
        post(
            "user",
            users.user,
            "One user, by id or email (the bare User)",
            _object(id=_S, email=_S),
            _USER,
        ),
        post(
            "update_user",
            users.update_user,
            "Change a user's identity, profile, roles, verification flags or MFA",
            _object(
                ("id",),
                id=_S,
                email=_S,
                email_verified=_B,
                given_name=_S,
                family_name=_S,
                middle_name=_S,
                nickname=_S,
                gender=_S,
                birthdate=_S,
                phone_number=_S,
                phone_number_verified=_B,
                picture=_S,
                roles={"type": "array", "items": _S},
                is_multi_factor_auth_enabled=_B,
                reset_mfa=_B,
                app_data={"type": "object"},
            ),
            _USER,
        ),
        post(
            "delete_user",
            users.delete_user,
            "Delete a user (by email, or id), its OTP and verification data; ends its sessions",
            _object(email=_S, id=_S),
            _MESSAGE,
        ),
        post(
            "verification_requests",
            users.verification_requests,
            "Pending verification requests, newest first",
            _object(pagination=_PAGINATION_IN),
            _listing("verification_requests", _VERIFICATION_REQUEST),
        ),
        post(
            "revoke_access",
            users.revoke_access,
            "Revoke a user's access and end every session at once",
            _USER_ID,
            _MESSAGE,
        ),
        post(
            "enable_access",
            users.enable_access,
            "Give a revoked user access again",
            _USER_ID,
            _MESSAGE,
        ),
        post(
            "invite_members",
            users.invite_members,
            "Create users and mail each an invitation link",
            _object(("emails",), emails={"type": "array", "items": _S}, redirect_uri=_S),
            _object(message=_S, Users={"type": "array", "items": _object(id=_S, email=_S)}),
        ),
        post(
            "add_webhook",
            hooks.add_webhook,
            "Register a webhook for an event (several per event allowed)",
            _object(
                ("event_name", "endpoint"),
                event_name=_S,
                event_description=_S,
                endpoint=_S,
                enabled=_B,
                headers=_MAP,
            ),
            _MESSAGE,
        ),
        post(
            "update_webhook",
            hooks.update_webhook,
            "Change a webhook's event, description, endpoint, enabled state or headers",
            _object(
                ("id",),
                id=_S,
                event_name=_S,
                event_description=_S,
                endpoint=_S,
                enabled=_B,
                headers=_MAP,
            ),
            _MESSAGE,
        ),
        post(
            "delete_webhook",
            hooks.delete_webhook,
            "Delete a webhook and its logs",
            _BY_ID,
            _MESSAGE,
        ),
        post("webhook", hooks.webhook, "One webhook", _BY_ID, _WEBHOOK),
        post(
            "webhooks",
            hooks.webhooks,
            "Webhooks, newest first",
            _object(pagination=_PAGINATION_IN),
            _listing("webhooks", _WEBHOOK),
        ),
        post(
            "webhook_logs",
            hooks.webhook_logs,
            "Delivery attempts, newest first, optionally of one webhook",
            _object(pagination=_PAGINATION_IN, webhook_id=_S),
            _listing("webhook_logs", _WEBHOOK_LOG),
        ),
        post(
            "test_endpoint",
            hooks.test_endpoint,
            "POST a signed sample event to an endpoint and return its answer",
            _object(
                ("event_name", "endpoint"),
                event_name=_S,
                endpoint=_S,
                event_description=_S,
                headers=_MAP,
            ),
            _object(http_status=_I, response=_S),
        ),
        post(
            "add_email_template",
            templates.add_email_template,
            "Replace the built-in mail of an event ({{.field.path}} placeholders)",
            _object(
                ("event_name", "subject", "template"),
                event_name=_S,
                subject=_S,
                template=_S,
                design=_S,
            ),
            _MESSAGE,
        ),
        post(
            "update_email_template",
            templates.update_email_template,
            "Change an email template",
            _object(("id",), id=_S, event_name=_S, subject=_S, template=_S, design=_S),
            _MESSAGE,
        ),
        post(
            "delete_email_template",
            templates.delete_email_template,
            "Delete an email template (the built-in mail is used again)",
            _BY_ID,
            _MESSAGE,
        ),
        post(
            "email_templates",
            templates.email_templates,
            "Email templates, newest first",
            _object(pagination=_PAGINATION_IN),
            _listing("email_templates", _EMAIL_TEMPLATE),
        ),
        post(
            "audit_logs",
            admin.audit.audit_logs,
            "Audit rows, newest first; resource is '<type>' or '<type>:<id>'",
            _object(
                pagination=_PAGINATION_IN,
                actor_id=_S,
                action=_S,
                resource=_S,
                resource_type=_S,
                resource_id=_S,
                from_timestamp=_I,
                to_timestamp=_I,
            ),
            _listing("audit_logs", _AUDIT_LOG),
        ),
        post(
            "user_sessions",
            admin.sessions.user_sessions,
            "A user's live sessions, oldest first (bastion)",
            _USER_ID,
            _object(sessions={"type": "array", "items": _SESSION}),
        ),
        post(
            "revoke_user_session",
            admin.sessions.revoke_user_session,
            "Sign one of a user's sessions out, on every instance (bastion)",
            _object(("user_id", "id"), user_id=_S, id=_S),
            _MESSAGE,
        ),
        post(
            "revoke_all_user_sessions",
            admin.sessions.revoke_all_user_sessions,
            "Sign every session of a user out; the account stays usable (bastion)",
            _USER_ID,
            _MESSAGE,
        ),
    ]
