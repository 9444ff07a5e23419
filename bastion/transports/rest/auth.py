"""The HTTP side of the authentication flows.

``auth_routes``: the JSON operations under ``/v1`` (bodies are the service's, bare).
``oauth_views``: what is not JSON-in/JSON-out: ``GET /verify_email`` (the
emailed link's landing, a redirect) and ``POST /oauth/revoke`` (form or JSON bodies,
OAuth error objects). The rest of the provider is :mod:`transports.rest.oauth`.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.core.auth.links import add_query
from bastion.service.auth.email_undo import UNDO_PATH
from bastion.service.auth.service import AuthService
from bastion.service.requests import ServiceOperation, bind, request_schema
from bastion.transports.http.app import CallerOf
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.dispatch import View
from bastion.transports.http.errors import http_status
from bastion.transports.http.routes import Route
from bastion.transports.http.wire import form_or_json, json_response, query_values

__all__ = ["auth_routes", "oauth_views"]

_MESSAGE = {"type": "object", "properties": {"message": {"type": "string"}}}
_PROFILE_UPDATED = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "authenticator_recovery_codes": {"type": "array", "items": {"type": "string"}},
    },
}
_AUTH_RESPONSE = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "access_token": {"type": ["string", "null"]},
        "id_token": {"type": ["string", "null"]},
        "refresh_token": {"type": ["string", "null"]},
        "expires_in": {"type": ["integer", "null"]},
        "user": {"type": ["object", "null"]},
        "should_show_email_otp_screen": {"type": "boolean"},
        "should_show_mobile_otp_screen": {"type": "boolean"},
        "should_show_totp_screen": {"type": "boolean"},
        "should_offer_email_otp_mfa_setup": {"type": "boolean"},
        "should_offer_sms_otp_mfa_setup": {"type": "boolean"},
        "should_offer_webauthn_mfa_verify": {"type": "boolean"},
    },
}


_SESSION = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "created_at": {"type": "integer"},
        "last_used_at": {"type": "integer"},
        "ip": {"type": "string"},
        "user_agent": {"type": "string"},
        "current": {"type": "boolean"},
    },
}
_SESSIONS = {
    "type": "object",
    "properties": {"sessions": {"type": "array", "items": _SESSION}},
}


def auth_routes(auth: AuthService) -> list[Route]:
    def post(
        path: str, operation: ServiceOperation, summary: str, response: dict[str, Any]
    ) -> Route:
        bound = bind(operation)
        return Route(
            method="POST",
            path=path,
            operation=bound,
            summary=summary,
            tag="auth",
            request_schema=request_schema(bound.request_type),
            response_schema=response,
            extra_statuses=(400, 401, 403, 404, 429),
        )

    return [
        post("/v1/signup", auth.signup, "Register a user", _AUTH_RESPONSE),
        post("/v1/login", auth.login, "Log in with email or phone and password", _AUTH_RESPONSE),
        post("/v1/magic_link_login", auth.magic_link_login, "Email a magic link", _MESSAGE),
        post("/v1/verify_email", auth.verify_email, "Finish email verification", _AUTH_RESPONSE),
        post(
            "/v1/resend_verify_email",
            auth.resend_verify_email,
            "Send a pending verification link again",
            _MESSAGE,
        ),
        post(
            "/v1/verify_otp",
            auth.verify_otp,
            "Finish a login's second factor with its code (mfa cookie)",
            _AUTH_RESPONSE,
        ),
        post("/v1/resend_otp", auth.resend_otp, "Send the MFA code again (mfa cookie)", _MESSAGE),
        post(
            "/v1/email_otp_mfa_setup",
            auth.email_otp_mfa_setup,
            "Set up emailed codes for a parked login (mfa cookie); a code is sent",
            _MESSAGE,
        ),
        post(
            "/v1/sms_otp_mfa_setup",
            auth.sms_otp_mfa_setup,
            "Set up texted codes for a parked login (mfa cookie); a code is sent",
            _MESSAGE,
        ),
        post(
            "/v1/totp_mfa_setup",
            auth.totp_mfa_setup,
            "Set up an authenticator app for a parked login (mfa cookie)",
            _AUTH_RESPONSE,
        ),
        post(
            "/v1/skip_mfa_setup",
            auth.skip_mfa_setup,
            "Skip an unenforced MFA offer and finish the login (mfa cookie)",
            _AUTH_RESPONSE,
        ),
        post(
            "/v1/lock_mfa",
            auth.lock_mfa,
            "Lock the account's MFA when no factor can be passed (mfa cookie)",
            _MESSAGE,
        ),
        post("/v1/forgot_password", auth.forgot_password, "Email a password-reset link", _MESSAGE),
        post("/v1/reset_password", auth.reset_password, "Set a new password by token", _MESSAGE),
        post("/v1/logout", auth.logout, "End the current session", _MESSAGE),
        Route(
            method="GET",
            path="/v1/profile",
            operation=bind(auth.profile),
            summary="The caller's profile",
            tag="auth",
            extra_statuses=(401,),
        ),
        Route(
            method="GET",
            path="/v1/sessions",
            operation=bind(auth.sessions_of_caller),
            summary="The caller's sessions, the current one marked (bastion)",
            tag="auth",
            response_schema=_SESSIONS,
            extra_statuses=(401,),
        ),
        post(
            "/v1/revoke_session",
            auth.revoke_session,
            "Sign one of the caller's sessions out, on every instance (bastion)",
            _MESSAGE,
        ),
        post(
            "/v1/update_profile",
            auth.update_profile,
            "Update the caller's profile (MFA changes need a fresh second factor)",
            _PROFILE_UPDATED,
        ),
        post(
            "/v1/deactivate_account",
            auth.deactivate_account,
            "Deactivate the caller's account",
            _MESSAGE,
        ),
        post("/v1/session", auth.session, "Rotate the session cookie, mint tokens", _AUTH_RESPONSE),
        post("/v1/revoke", auth.revoke, "Revoke a refresh token", _MESSAGE),
        post(
            "/v1/validate_jwt_token",
            auth.validate_jwt_token,
            "Validate a token (and roles, relations)",
            {"type": "object"},
        ),
        post(
            "/v1/validate_session",
            auth.validate_session,
            "Validate a session cookie (and roles, relations)",
            {"type": "object"},
        ),
    ]


def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    return json_response({"error": error, "error_description": description}, status)


def _page(title: str, body: str, status: int = 200) -> Response:
    """A small self-contained HTML page (no scripts, no outside resources)."""
    page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    return Response(page, status_code=status, media_type="text/html; charset=utf-8")


def oauth_views(auth: AuthService, caller_context: CallerOf) -> list[View]:
    settings = auth.settings
    issuer = auth.policy.issuer
    verify_email = bind(auth.verify_email)
    undo_email_change = bind(auth.undo_email_change)

    def client_ok(form: dict[str, Any]) -> bool:
        return form.get("client_id") == settings.client_id

    async def revoke(request: Request) -> Response:
        form = await form_or_json(request)
        if not client_ok(form):
            return _oauth_error("invalid_client", "The client_id is invalid", 401)
        hint = form.get("token_type_hint")
        if hint not in (None, "", "refresh_token", "access_token"):
            return _oauth_error("unsupported_token_type", "unsupported token_type_hint")
        value = form.get("token") or form.get("refresh_token")
        if isinstance(value, str) and value:
            # RFC 7009 2.2: an invalid or unknown token is not an error.
            await auth.revoke_token(value, caller_context(request))
        return json_response({})

    async def verify_email_landing(request: Request) -> Response:
        args = query_values(request)
        wanted = args.get("redirect_uri", "")
        target = wanted if wanted and auth.redirect_allowed(wanted) else issuer
        # magic_link_login carries state, roles and scope in the link's redirect_uri
        carried = dict(parse_qsl(urlsplit(wanted).query))

        def arg(name: str) -> str:
            return str(args.get(name) or carried.get(name, ""))

        body = {
            "token": args.get("token", ""),
            "state": arg("state") or None,
            "roles": [r for r in arg("roles").split(",") if r],
            "scope": [s for s in arg("scope").replace(",", " ").split() if s],
        }
        try:
            reply = await verify_email(body, caller_context(request))
        except errors.ClientError as error:
            location = add_query(target, [("error", error.message)])
            return Response(status_code=307, headers={"Location": location})
        result = reply.body
        params = [
            ("access_token", result.get("access_token") or ""),
            ("token_type", "bearer"),
            ("expires_in", str(result.get("expires_in") or "")),
            ("id_token", result.get("id_token") or ""),
            ("refresh_token", result.get("refresh_token") or ""),
            ("state", args.get("state", "")),
        ]
        response = Response(status_code=307, headers={"Location": add_query(target, params)})
        return with_cookies(response, reply.cookies)

    async def undo_email_change_page(request: Request) -> Response:
        """The link's landing: one button, so a mail scanner fetching the link undoes
        nothing the owner did."""
        token = html.escape(query_values(request).get("token", ""))
        form = (
            f'<form method="post" action="{UNDO_PATH}">'
            f'<input type="hidden" name="token" value="{token}">'
            "<p>Undo the change of this account's email address? Every session of the "
            'account will end.</p><button type="submit">Undo the change</button></form>'
        )
        return _page("Undo the email change", form)

    async def undo_email_change_submit(request: Request) -> Response:
        token = (await form_or_json(request)).get("token")
        wire = {"token": token if isinstance(token, str) else ""}
        try:
            reply = await undo_email_change(wire, caller_context(request))
        except errors.ClientError as error:
            body = f"<p>{html.escape(error.message)}</p>"
            return _page("The change was not undone", body, http_status(error))
        return _page("Email change undone", f"<p>{html.escape(reply.body['message'])}</p>")

    return [
        View("/oauth/revoke", ("POST",), revoke),
        View("/verify_email", ("GET",), verify_email_landing),
        View(UNDO_PATH, ("GET",), undo_email_change_page),
        View(UNDO_PATH, ("POST",), undo_email_change_submit),
    ]
