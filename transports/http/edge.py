"""Decisions the HTTP edge makes before a request reaches the service layer.

Plain functions over plain values (no framework objects), so each rule can be tested
exhaustively: which origin may call us (CORS and CSRF share one matcher), which
address is the client (``--trusted-proxies``), and which headers every response
carries.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "CORS_ALLOW_HEADERS",
    "CORS_ALLOW_METHODS",
    "CSRF_EXEMPT_PREFIXES",
    "OriginPolicy",
    "client_ip",
    "cors_headers",
    "csrf_refusal",
    "parse_networks",
    "request_origin",
    "security_headers",
]

CORS_ALLOW_HEADERS = (
    "authorization, content-type, accept, origin, cache-control, x-requested-with, "
    "x-authorizer-url, x-authorizer-client-id, x-service-admin-secret, "
    "x-authorizer-admin-secret"
)
CORS_ALLOW_METHODS = "GET, POST, PUT, OPTIONS"

#: State-changing calls that authenticate the client in their body, not by cookie,
#: and so carry no CSRF risk (RFC 6749 token endpoints, provider callbacks).
CSRF_EXEMPT_PREFIXES = ("/oauth/token", "/oauth/revoke", "/oauth/introspect", "/oauth_callback/")
_CSRF_GUARDED_PREFIXES = ("/v1/", "/graphql")
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class _Origin:
    host: str
    port: int | None


def _parse_origin(value: str) -> _Origin | None:
    """``scheme://host[:port]`` -> host and explicit non-default port; None if unparsable."""
    try:
        parts = urlsplit(value if "://" in value else f"http://{value}")
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    if port is not None and port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None
    return _Origin(host, port)


def _label_matches(pattern: str, label: str) -> bool:
    """A pattern label may hold ``*`` standing for any run of characters."""
    if "*" not in pattern:
        return pattern == label
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), label) is not None


def _host_matches(pattern: str, host: str) -> bool:
    p_labels = pattern.split(".")
    h_labels = host.split(".")
    if p_labels[0] == "*":
        # "*.example.com": one or more sub-domain labels in front of example.com.
        rest = p_labels[1:]
        return len(h_labels) > len(rest) and all(
            _label_matches(p, h) for p, h in zip(rest, h_labels[-len(rest) :], strict=True)
        )
    return len(p_labels) == len(h_labels) and all(
        _label_matches(p, h) for p, h in zip(p_labels, h_labels, strict=True)
    )


class OriginPolicy:
    """Which browser origins may call us, from ``--allowed-origins`` and ``--url``.

    Two levels. An origin is *trusted* (with the user's cookies: credentialed CORS,
    cookie-carrying state changes, redirects) when it is the server's own (``--url``) or
    matches a listed entry: origins or host patterns, where the scheme is not compared,
    a port is compared unless it is the scheme's default, and ``*`` stands for one or
    more sub-domain labels (``*.example.com``) or for characters inside a label
    (``app-*.example.com``). ``*`` in the list trusts nobody more: it lets any origin
    call *without* cookies (CORS answers ``*``). ``null`` (sandboxed frames, files,
    some redirects) is never allowed at all.
    """

    def __init__(self, allowed_origins: Iterable[str], own_url: str) -> None:
        entries = [e.strip() for e in allowed_origins if e.strip()]
        self.allow_any = "*" in entries
        self._patterns = [o for o in (_parse_origin(e) for e in entries if e != "*") if o]
        self._own = _parse_origin(own_url)

    def trusts(self, origin: str) -> bool:
        """May ``origin`` act with the user's cookies?"""
        if origin.strip().lower() == "null":
            return False
        parsed = _parse_origin(origin)
        if parsed is None:
            return False
        if parsed == self._own:
            return True
        return any(
            p.port == parsed.port and _host_matches(p.host, parsed.host) for p in self._patterns
        )

    def allows(self, origin: str) -> bool:
        """May ``origin`` call at all (without cookies)?"""
        if origin.strip().lower() == "null":
            return False
        return self.allow_any or self.trusts(origin)


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


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(entries: Sequence[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) from ``--trusted-proxies``; validated at startup."""
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in networks)


def client_ip(peer: str, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """The client's address as ``--trusted-proxies`` defines it.

    With no trusted network, or a peer outside them, the socket peer is the client and
    ``X-Forwarded-For`` is ignored (it is whatever the client wrote). From a trusted
    peer, ``X-Forwarded-For`` is read right to left, skipping trusted hops: the first
    untrusted address is the client, because only the hops we trust appended honestly.
    """
    if not trusted or not forwarded_for or not _trusted(peer, trusted):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return peer
        if not _trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer


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
