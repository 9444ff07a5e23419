"""OAuth errors (RFC 6749 §4.1.2.1, §5.2; OIDC Core §3.1.2.6) as leaves of the one hierarchy.

Each leaf carries its OAuth ``error`` code and the HTTP status the token endpoint answers
with; ``code`` is the gRPC-style token of :mod:`core.errors`, for surfaces without OAuth's
JSON error object.
"""

from __future__ import annotations

from typing import ClassVar

from bastion.core.errors import ClientError

__all__ = [
    "AccessDenied",
    "InvalidClient",
    "InvalidGrant",
    "InvalidRequest",
    "InvalidScope",
    "InvalidToken",
    "LoginRequired",
    "OAuthError",
    "UnsupportedGrantType",
    "UnsupportedResponseType",
    "UnsupportedTokenType",
]


class OAuthError(ClientError, abstract=True):
    error: ClassVar[str]
    status: ClassVar[int] = 400
    code = "invalid_argument"


class InvalidRequest(OAuthError):
    error = "invalid_request"


class InvalidClient(OAuthError):
    error = "invalid_client"
    status = 401
    code = "unauthenticated"


class InvalidGrant(OAuthError):
    error = "invalid_grant"


class InvalidScope(OAuthError):
    error = "invalid_scope"


class UnsupportedGrantType(OAuthError):
    error = "unsupported_grant_type"


class UnsupportedResponseType(OAuthError):
    error = "unsupported_response_type"


class UnsupportedTokenType(OAuthError):
    error = "unsupported_token_type"


class AccessDenied(OAuthError):
    error = "access_denied"
    status = 403
    code = "permission_denied"


class LoginRequired(OAuthError):
    """OIDC ``prompt=none`` (or no login page) and no session."""

    error = "login_required"
    status = 401
    code = "unauthenticated"


class InvalidToken(OAuthError):
    """RFC 6750 §3.1: a bearer token that is expired, revoked or not ours."""

    error = "invalid_token"
    status = 401
    code = "unauthenticated"
