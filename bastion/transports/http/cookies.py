"""The one place a service result's cookies become ``Set-Cookie`` headers on HTTP.

Written here rather than through ``http.cookies`` (what Starlette's ``set_cookie`` uses):
that module quotes a value holding characters outside its own list, which a browser then
sends back with the quotes; bastion's values are tokens, written as they are, and a value
no cookie may carry is refused here instead of being altered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.responses import Response

from bastion.service.context import Cookie

__all__ = ["set_cookie_header", "with_cookies"]

#: RFC 6265 4.1.1 cookie-octet (no space, quote, comma, semicolon or backslash).
_COOKIE_OCTETS = re.compile(r"[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*")
_EPOCH = "Thu, 01 Jan 1970 00:00:00 GMT"


def set_cookie_header(cookie: Cookie) -> str:
    """``cookie`` as a ``Set-Cookie`` value; a cookie with no lifetime left clears it."""
    if not _COOKIE_OCTETS.fullmatch(cookie.name) or not _COOKIE_OCTETS.fullmatch(cookie.value):
        raise ValueError(f"cookie {cookie.name!r} has a value no cookie may carry")
    parts = [f"{cookie.name}={cookie.value}"]
    if cookie.domain:
        parts.append(f"Domain={cookie.domain}")
    if cookie.max_age > 0:
        parts.append(f"Max-Age={cookie.max_age}")
    else:
        parts += [f"Expires={_EPOCH}", "Max-Age=0"]
    if cookie.secure:
        parts.append("Secure")
    if cookie.http_only:
        parts.append("HttpOnly")
    if cookie.path:
        parts.append(f"Path={cookie.path}")
    if cookie.same_site:
        parts.append(f"SameSite={cookie.same_site}")
    return "; ".join(parts)


def with_cookies(response: Response, cookies: Iterable[Cookie]) -> Response:
    """Set each cookie on ``response``."""
    for cookie in cookies:
        response.headers.append("Set-Cookie", set_cookie_header(cookie))
    return response
