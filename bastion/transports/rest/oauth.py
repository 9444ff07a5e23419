"""The provider's HTTP endpoints (reference §1.2, §5.4 - §5.6).

Errors here are OAuth's JSON objects ``{"error", "error_description"}`` with the status
of the error class (RFC 6749 §5.2), not the ``/v1`` envelope; a browser-facing refusal
that cannot be sent to a trusted redirect URI is a 400 of the same shape.
"""

from __future__ import annotations

import html
import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from authlib.oauth2.rfc6749.util import extract_basic_authorization
from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.oauth import rfc7636_pkce
from bastion.core.oauth.errors import (
    InvalidClient,
    InvalidRequest,
    OAuthError,
    UnsupportedGrantType,
)
from bastion.core.oauth.rfc6749_authorize import RESPONSE_TYPES, ResponseMode
from bastion.core.state_machines.oauth_authorize_effects import Deliver
from bastion.service.oauth.service import OAuthService
from bastion.transports.http.app import CallerOf
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.dispatch import View
from bastion.transports.http.edge import request_origin
from bastion.transports.http.wire import (
    form_or_json,
    form_values,
    json_response,
    query_values,
)
from bastion.transports.rest.auth import _oauth_error
from bastion.transports.rest.oauth_responses import redirect, render_answer

__all__ = ["discovery_document", "provider_views"]

_CLAIMS = (
    "aud",
    "exp",
    "iss",
    "iat",
    "sub",
    "nonce",
    "sid",
    "auth_time",
    "amr",
    "acr",
    "at_hash",
    "c_hash",
    "email",
    "email_verified",
    "given_name",
    "family_name",
    "middle_name",
    "nickname",
    "preferred_username",
    "picture",
    "gender",
    "birthdate",
    "phone_number",
    "phone_number_verified",
    "updated_at",
    "created_at",
    "roles",
    "allowed_roles",
    "login_method",
)


def discovery_document(oauth: OAuthService) -> dict[str, Any]:
    """Exactly what this server supports."""
    settings, auth = oauth.settings, oauth.auth
    issuer = auth.policy.issuer
    response_types = sorted(
        " ".join(sorted(t, key=["code", "id_token", "token"].index)) for t in RESPONSE_TYPES
    )
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "userinfo_endpoint": f"{issuer}/userinfo",
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "introspection_endpoint": f"{issuer}/oauth/introspect",
        "end_session_endpoint": f"{issuer}/logout",
        "response_types_supported": response_types,
        "response_modes_supported": [m.value for m in ResponseMode],
        # implicit: /authorize answers token and id_token response types when asked
        "grant_types_supported": ["authorization_code", "refresh_token", "implicit"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": auth.signer.algorithms(),
        "scopes_supported": [*DEFAULT_SCOPE, "phone", "offline_access"],
        "claims_supported": sorted({*_CLAIMS, settings.jwt_role_claim}),
        "token_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "introspection_endpoint_auth_methods_supported": [
            "client_secret_basic",
            "client_secret_post",
        ],
        "code_challenge_methods_supported": list(rfc7636_pkce.METHODS),
        "claims_parameter_supported": False,
        "request_parameter_supported": False,
        "request_uri_parameter_supported": False,
        "backchannel_logout_supported": bool(settings.backchannel_logout_uri),
        "backchannel_logout_session_supported": bool(settings.backchannel_logout_uri),
    }


def _error(request: Request, error: OAuthError) -> Response:
    """RFC 6749 §5.2: ``invalid_client`` is 401 (with a challenge) when the client tried
    HTTP Basic, else 400 as reference §5.5 has it."""
    status = error.status
    basic = request.headers.get("authorization", "")[:6].lower() == "basic "
    if isinstance(error, InvalidClient) and not basic:
        status = 400
    response = _oauth_error(error.error, error.message, status)
    response.headers["Cache-Control"] = "no-store"
    if isinstance(error, InvalidClient) and basic:
        response.headers["WWW-Authenticate"] = 'Basic realm="oauth"'
    return response


def _client_credentials(request: Request, form: dict[str, Any]) -> tuple[str, str | None]:
    """client_secret_basic, else client_secret_post, else a public client (id only)."""
    basic_id, basic_secret = extract_basic_authorization(request.headers)
    if basic_id is not None:
        return str(basic_id), "" if basic_secret is None else str(basic_secret)
    client_id, secret = form.get("client_id"), form.get("client_secret")
    return (
        client_id if isinstance(client_id, str) else "",
        secret if isinstance(secret, str) else None,
    )


def _logout_page(title: str, form: str = "") -> Response:
    body = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head><body><main><h1>{html.escape(title)}</h1>"
        f"{form}</main></body></html>"
    )
    return Response(
        body, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"}
    )


def provider_views(oauth: OAuthService, caller_context: CallerOf) -> list[View]:
    auth = oauth.auth
    issuer = auth.policy.issuer

    async def openid_configuration(_: Request) -> Response:
        return json_response(discovery_document(oauth), headers={"Cache-Control": "max-age=300"})

    # Every relying party fetches the key set, often: it is encoded once per signer (a
    # signer's keys are fixed when it is made; new keys come with a new signer).
    encoded: list[Any] = [None, b""]  # the signer, its key set as JSON

    async def jwks(_: Request) -> Response:
        signer = auth.signer
        if encoded[0] is not signer:
            encoded[:] = [signer, json.dumps(signer.jwks(), separators=(",", ":")).encode()]
        return Response(
            encoded[1], media_type="application/json", headers={"Cache-Control": "max-age=300"}
        )

    async def authorize(request: Request) -> Response:
        if request.method == "POST":
            params = await form_values(request)
        else:
            params = query_values(request)
        try:
            answer = await oauth.authorize(params, caller_context(request))
        except OAuthError as error:
            return _error(request, error)
        if isinstance(answer, Deliver):
            return render_answer(answer.redirect_uri, answer.mode, answer.params)
        page = "/app/signup" if answer.signup else "/app"
        return redirect(f"{issuer}{page}?{urlencode(answer.params)}")

    async def token(request: Request) -> Response:
        form = await form_or_json(request)
        grant = form.get("grant_type") or "authorization_code"
        try:
            if grant == "refresh_token":
                return await refresh(request, form)
            if grant != "authorization_code":
                raise UnsupportedGrantType(f"grant_type {grant} is not supported")
            client_id, secret = _client_credentials(request, form)
            if not client_id:
                raise InvalidRequest("client_id is required")
            reply = await oauth.redeem(
                form,
                caller_context(request),
                client_authenticated=oauth.check_client(client_id, secret),
            )
        except OAuthError as error:
            return _error(request, error)
        return json_response(
            reply.body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"}
        )

    async def refresh(request: Request, form: dict[str, Any]) -> Response:
        client_id, secret = _client_credentials(request, form)
        if not client_id:
            raise InvalidRequest("client_id is required")
        if oauth.check_client(client_id, secret) is False:
            raise InvalidClient("The client_id is invalid")
        refresh_token = form.get("refresh_token")
        if not isinstance(refresh_token, str) or not refresh_token:
            raise InvalidRequest("refresh_token is required")
        try:
            reply = await auth.refresh(refresh_token, caller_context(request))
        except errors.Unauthenticated:
            return _oauth_error("invalid_grant", "Invalid refresh token")
        response = json_response(reply.body, headers={"Cache-Control": "no-store"})
        return with_cookies(response, reply.cookies)

    async def introspect(request: Request) -> Response:
        form = await form_or_json(request)
        client_id, secret = _client_credentials(request, form)
        if secret is None or not oauth.client_secret_ok(client_id, secret):
            return _error(request, InvalidClient("client authentication is required"))
        token = form.get("token")
        if not isinstance(token, str) or not token:
            return _error(request, InvalidRequest("token is required"))
        return json_response(await oauth.introspect(token), headers={"Cache-Control": "no-store"})

    async def userinfo(request: Request) -> Response:
        try:
            claims = await oauth.userinfo(caller_context(request))
        except OAuthError as error:
            response = _error(request, error)
            response.headers["WWW-Authenticate"] = f'Bearer error="{error.error}"'
            return response
        return json_response(claims, headers={"Cache-Control": "no-store"})

    async def logout(request: Request) -> Response:
        if request.method == "POST":
            params = await form_values(request)
        else:
            params = query_values(request)
        hint = oauth.id_token_subject(params.get("id_token_hint", ""))
        target = params.get("post_logout_redirect_uri", "")
        state = params.get("state", "")
        if hint is None:
            origin = (request_origin(request.headers) or "").lower()
            confirmed = request.method == "POST" and origin == _own_origin(issuer)
            if not confirmed:
                return _logout_page("Log out?", _confirm_form(target, state))
        try:
            done = await oauth.end_session(
                caller_context(request),
                post_logout_redirect_uri=target,
                state=state,
                hinted_subject=hint,
            )
        except OAuthError as error:
            return _error(request, error)
        response = redirect(done.redirect) if done.redirect else _logout_page("You are logged out")
        return with_cookies(response, done.cookies)

    return [
        View("/.well-known/openid-configuration", ("GET",), openid_configuration, instant=True),
        View("/.well-known/jwks.json", ("GET",), jwks, instant=True),
        View("/authorize", ("GET", "POST"), authorize),
        View("/oauth/token", ("POST",), token),
        View("/oauth/introspect", ("POST",), introspect),
        View("/userinfo", ("GET", "POST"), userinfo),
        View("/logout", ("GET", "POST"), logout),
    ]


def _own_origin(issuer: str) -> str:
    parts = urlsplit(issuer)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _confirm_form(target: str, state: str) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(value)}">'
        for name, value in (("post_logout_redirect_uri", target), ("state", state))
        if value
    )
    return (
        f'<form method="post" action="/logout">{hidden}'
        '<button type="submit">Log out</button></form>'
    )
