"""Decisions the HTTP edge makes before a request reaches the service layer.

Plain functions over plain values (no framework objects), so each rule can be tested
exhaustively: what CORS answers, which requests CSRF refuses (both over
:class:`core.origins.OriginPolicy`), and which headers every response carries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from bastion.core.origins import OriginPolicy

__all__ = [
    "CORS_ALLOW_HEADERS",
    "CORS_ALLOW_METHODS",
    "CSRF_EXEMPT_PREFIXES",
    "cors_headers",
    "csrf_refusal",
    "request_id",
    "request_origin",
    "security_headers",
]

CORS_ALLOW_HEADERS = (
    "authorization, content-type, accept, origin, cache-control, x-requested-with, "
    "x-authorizer-url, x-authorizer-client-id, x-service-admin-secret, "
    "x-authorizer-admin-secret, x-request-id"
)
CORS_ALLOW_METHODS = "GET, POST, PUT, OPTIONS"

#: State-changing calls that authenticate the client in their body, not by cookie,
#: and so carry no CSRF risk (RFC 6749 token endpoints, provider callbacks).
CSRF_EXEMPT_PREFIXES = ("/oauth/token", "/oauth/revoke", "/oauth/introspect", "/oauth_callback/")
_CSRF_GUARDED_PREFIXES = ("/v1/", "/graphql")
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def request_origin(headers: Mapping[str, str]) -> str | None:
    """The caller's origin: ``Origin``, else scheme://host of ``Referer``."""
    origin = headers.get("origin", "").strip()
    if origin and origin != "null":
        return origin
    referer = headers.get("referer", "").strip()
    if referer:
        parts = urlsplit(referer)
        if parts.scheme and parts.netloc:
            return f"{parts.scheme}://{parts.netloc}"
    return None


def csrf_refusal(
    method: str, path: str, headers: Mapping[str, str], policy: OriginPolicy
) -> str | None:
    """Why a request is refused as a possible cross-site forgery, or None.

    A browser always sends ``Origin`` (or at least ``Referer``) on a cross-site POST, so
    requiring one stops forged requests; a request carrying cookies must come from an
    origin trusted with them (``--url`` or a listed origin), whatever ``*`` allows.
    Requiring JSON (or ``X-Requested-With``) as well keeps simple HTML form posts out.
    A cookie-carrying read of the API (a GET under ``/v1`` or ``/graphql``: profiles,
    sessions, admin data) is refused when the browser says another site or an untrusted
    origin sent it (``Origin``, or ``Sec-Fetch-Site: cross-site`` / ``same-site``).
    """
    if path.startswith(CSRF_EXEMPT_PREFIXES):
        return None
    if not path.startswith(_CSRF_GUARDED_PREFIXES) and path != "/graphql":
        return None
    with_cookies = bool(headers.get("cookie", "").strip())
    if method.upper() not in _STATE_CHANGING:
        return _credentialed_read_refusal(headers, policy) if with_cookies else None
    origin = request_origin(headers)
    if origin is None:
        return "Origin or Referer header is required for state-changing requests"
    if with_cookies and not policy.trusts(origin):
        return (
            "Origin not allowed to act with this site's cookies (list it in "
            "--allowed-origins to trust it)"
        )
    if not policy.allows(origin):
        return "Origin not allowed"
    content_type = headers.get("content-type", "").lower()
    if "application/json" not in content_type and "x-requested-with" not in headers:
        return (
            "State-changing requests must include Content-Type: application/json "
            "or X-Requested-With header"
        )
    return None


def _credentialed_read_refusal(headers: Mapping[str, str], policy: OriginPolicy) -> str | None:
    origin = headers.get("origin", "").strip()
    if origin:
        if policy.trusts(origin):
            return None
        return "Origin not allowed to read with this site's cookies"
    if headers.get("sec-fetch-site", "").strip().lower() in ("cross-site", "same-site"):
        return "Cross-site reads with this site's cookies are not allowed"
    return None


def cors_headers(origin: str | None, policy: OriginPolicy) -> dict[str, str]:
    """CORS answer headers: credentials only ever for a trusted origin, ``*`` (never with
    credentials) for any other origin when ``--allowed-origins`` has ``*``."""
    if not origin or origin.strip().lower() == "null":
        return {}
    if policy.trusts(origin):
        return {"Access-Control-Allow-Origin": origin, "Access-Control-Allow-Credentials": "true"}
    if policy.allow_any:
        return {"Access-Control-Allow-Origin": "*"}
    return {}


def security_headers(*, csp: bool, hsts: bool) -> dict[str, str]:
    """Headers every HTTP response carries."""
    headers = {
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "strict-origin-when-cross-origin",
    }
    if csp:
        headers["Content-Security-Policy"] = (
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'; "
            "object-src 'none'"
        )
    if hsts:
        headers["Strict-Transport-Security"] = "max-age=31536000; includeSubDomains"
    return headers


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id(presented: str | None) -> str:
    """The request's id for logs and the ``X-Request-Id`` answer: the caller's (a proxy's
    or client's) when it is a plain token of at most 128 characters, else a new one. A
    malformed one is replaced, never echoed: it would reach logs and headers verbatim.

    A new one is 32 random hex digits, like the uuid4 it was (a fifth of the cost). It
    only correlates a request's log lines and answer: it is no secret and grants nothing,
    so it need not be unguessable; random, it is unique without coordination between
    processes (``--workers``) or restarts."""
    if presented and _REQUEST_ID.fullmatch(presented):
        return presented
    return os.urandom(16).hex()
