"""REST routes of the passkey operations: Authorizer's paths (``authorizer-proto`` 0.2.0's
``google.api.http`` rules, all POST) and bastion's own beside them."""

from __future__ import annotations

from typing import Any

from bastion.service.passkeys import PasskeyService
from bastion.service.requests import ServiceOperation, bind, request_schema
from bastion.transports.http.routes import Route

__all__ = ["passkey_routes"]

_OPTIONS = {"type": "object", "properties": {"options": {"type": "string"}}}
_MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}}
_AUTH = {"type": "object", "properties": {"message": {"type": "string"}}}
_LIST = {
    "type": "object",
    "properties": {"webauthn_credentials": {"type": "array", "items": {"type": "object"}}},
}


def passkey_routes(passkeys: PasskeyService) -> list[Route]:
    def post(
        path: str, operation: ServiceOperation, summary: str, response: dict[str, Any], tag: str
    ) -> Route:
        bound = bind(operation)
        return Route(
            method="POST",
            path=path,
            operation=bound,
            summary=summary,
            tag=tag,
            request_schema=request_schema(bound.request_type),
            response_schema=response,
            extra_statuses=(400, 401, 403, 404, 409, 429),
        )

    p = passkeys
    return [
        post(
            "/v1/webauthn_registration_options",
            p.webauthn_registration_options,
            "Options to create a passkey (signed in, fresh password or second factor)",
            _OPTIONS,
            "auth",
        ),
        post(
            "/v1/webauthn_registration_verify",
            p.webauthn_registration_verify,
            "Store the passkey a registration response proves",
            _AUTH,
            "auth",
        ),
        post(
            "/v1/webauthn_login_options",
            p.webauthn_login_options,
            "Options to sign in with a passkey (alone, or the second factor with the mfa cookie)",
            _OPTIONS,
            "auth",
        ),
        post(
            "/v1/webauthn_login_verify",
            p.webauthn_login_verify,
            "Sign in with a passkey's assertion",
            _AUTH,
            "auth",
        ),
        post(
            "/v1/webauthn_credentials",
            p.webauthn_credentials,
            "The caller's passkeys",
            _LIST,
            "auth",
        ),
        post(
            "/v1/webauthn_delete_credential",
            p.webauthn_delete_credential,
            "Delete one of the caller's passkeys",
            _MESSAGE,
            "auth",
        ),
        post(
            "/v1/webauthn_rename_credential",
            p.webauthn_rename_credential,
            "Rename one of the caller's passkeys (bastion)",
            _MESSAGE,
            "auth",
        ),
        post(
            "/v1/admin/webauthn_credentials",
            p.admin_webauthn_credentials,
            "A user's passkeys (bastion)",
            _LIST,
            "admin",
        ),
        post(
            "/v1/admin/webauthn_delete_credential",
            p.admin_webauthn_delete_credential,
            "Delete one of a user's passkeys (bastion)",
            _MESSAGE,
            "admin",
        ),
    ]
