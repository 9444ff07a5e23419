"""The one place a service result's cookies become ``Set-Cookie`` headers on HTTP."""

from __future__ import annotations

from collections.abc import Iterable

from quart import Response

from bastion.service.context import Cookie


def with_cookies(response: Response, cookies: Iterable[Cookie]) -> Response:
    """Set each cookie on ``response``; a cookie with no lifetime left clears it."""
    for cookie in cookies:
        response.set_cookie(
            cookie.name,
            cookie.value,
            max_age=cookie.max_age if cookie.max_age > 0 else 0,
            expires=0 if cookie.max_age <= 0 else None,
            path=cookie.path,
            domain=cookie.domain,
            secure=cookie.secure,
            httponly=cookie.http_only,
            samesite=cookie.same_site,
        )
    return response
