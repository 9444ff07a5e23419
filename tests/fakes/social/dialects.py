"""What each provider documents, written down independently of bastion's own table: the
paths of its endpoints, how the client must authenticate, what a token response and a
profile look like, and the issuer of its ID tokens.

``{tenant}`` in a Microsoft path matches any tenant segment.
"""

from __future__ import annotations

import dataclasses

__all__ = ["DIALECTS", "Dialect"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Dialect:
    name: str
    authorize: str
    token: str
    #: "post" (client_secret in the form), "basic" (HTTP Basic), "get" (Facebook's query)
    client_auth: str = "post"
    jwks: str | None = None
    #: the ``iss`` path after the origin (ID-token providers only)
    issuer_path: str | None = None
    #: "RS256" or "ES256" for ID tokens
    id_token_alg: str = "RS256"
    #: profile endpoints (API providers)
    profile: str | None = None
    emails: str | None = None
    #: PKCE: "required", "accepted" or "none"
    pkce: str = "none"
    #: Apple posts the code back (``response_mode=form_post``)
    form_post: bool = False
    #: GitHub answers a token request form-encoded unless asked for JSON
    json_only_when_asked: bool = False


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            name="google",
            authorize="/o/oauth2/v2/auth",
            token="/token",
            jwks="/oauth2/v3/certs",
            issuer_path="",
            pkce="accepted",
        ),
        Dialect(
            name="github",
            authorize="/login/oauth/authorize",
            token="/login/oauth/access_token",
            profile="/user",
            emails="/user/emails",
            pkce="accepted",
            json_only_when_asked=True,
        ),
        Dialect(
            name="facebook",
            authorize="/v21.0/dialog/oauth",
            token="/v21.0/oauth/access_token",
            client_auth="get",
            profile="/v21.0/me",
            pkce="accepted",
        ),
        Dialect(
            name="microsoft",
            authorize="/{tenant}/oauth2/v2.0/authorize",
            token="/{tenant}/oauth2/v2.0/token",
            jwks="/{tenant}/discovery/v2.0/keys",
            issuer_path="/{tid}/v2.0",
            pkce="accepted",
        ),
        Dialect(
            name="twitch",
            authorize="/oauth2/authorize",
            token="/oauth2/token",
            jwks="/oauth2/keys",
            issuer_path="/oauth2",
        ),
        Dialect(
            name="linkedin",
            authorize="/oauth/v2/authorization",
            token="/oauth/v2/accessToken",
            profile="/v2/userinfo",
        ),
        Dialect(
            name="apple",
            authorize="/auth/authorize",
            token="/auth/token",
            jwks="/auth/keys",
            issuer_path="",
            form_post=True,
        ),
        Dialect(
            name="discord",
            authorize="/oauth2/authorize",
            token="/api/oauth2/token",
            profile="/api/users/@me",
        ),
        Dialect(
            name="twitter",
            authorize="/i/oauth2/authorize",
            token="/2/oauth2/token",
            client_auth="basic",
            profile="/2/users/me",
            pkce="required",
        ),
        Dialect(
            name="roblox",
            authorize="/oauth/v1/authorize",
            token="/oauth/v1/token",
            jwks="/oauth/v1/certs",
            issuer_path="/oauth/",
            id_token_alg="ES256",
            pkce="accepted",
        ),
    )
}
