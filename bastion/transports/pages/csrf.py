"""Cross-site request forgery defences for the login pages' form posts.

The pages post plain HTML forms (no JavaScript, so no JSON and no custom header): the
HTTP edge's rule for ``/v1`` and ``/graphql`` cannot apply. Two checks instead, both
required:

1. ``Origin`` (or, failing it, ``Referer``) names this server or an origin that
   ``--allowed-origins`` lists. Browsers send ``Origin`` on every form POST.
2. A per-browser token: the ``app_csrf`` cookie (random, HttpOnly, SameSite=Strict, path
   ``/app``) and, in every form, a hidden ``csrf_token`` that is an HMAC of that cookie
   under a key derived from ``--client-secret``. A site that can plant a cookie still
   cannot compute the matching token. Compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bastion.service.context import Cookie
from bastion.transports.http.edge import request_origin

__all__ = ["CSRF_COOKIE", "CSRF_FIELD", "FormGuard"]

CSRF_COOKIE = "app_csrf"
CSRF_FIELD = "csrf_token"
_COOKIE_BYTES = 32
_COOKIE_MAX_AGE = 24 * 3600
_INFO = b"bastion login page csrf v1"
_HEX = frozenset("0123456789abcdef")


class FormGuard:
    def __init__(
        self, client_secret: str, *, secure: bool, origin_allowed: Callable[[str], bool]
    ) -> None:
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            client_secret.encode()
        )
        self._secure = secure
        self._origin_allowed = origin_allowed

    def _token(self, cookie_value: str) -> str:
        return hmac.new(self._key, cookie_value.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def _well_formed(value: str | None) -> bool:
        return (
            value is not None and len(value) == _COOKIE_BYTES * 2 and all(c in _HEX for c in value)
        )

    def issue(self, cookies: Mapping[str, str]) -> tuple[str, Cookie | None]:
        """The token for this browser's forms, and the cookie to set if it has none yet."""
        present = cookies.get(CSRF_COOKIE)
        if self._well_formed(present):
            assert present is not None
            return self._token(present), None
        value = secrets.token_hex(_COOKIE_BYTES)
        cookie = Cookie(
            name=CSRF_COOKIE,
            value=value,
            max_age=_COOKIE_MAX_AGE,
            secure=self._secure,
            same_site="Strict",
            path="/app",
        )
        return self._token(value), cookie

    def refusal(
        self, headers: Mapping[str, str], cookies: Mapping[str, str], form: Mapping[str, str]
    ) -> str | None:
        """Why a form post is refused, or None when it passes both checks."""
        origin = request_origin(headers)
        if origin is None or not self._origin_allowed(origin):
            return "This form was not sent from this site."
        present = cookies.get(CSRF_COOKIE)
        if not self._well_formed(present):
            return "Your browser did not send this site's form cookie; allow cookies and retry."
        assert present is not None
        sent = form.get(CSRF_FIELD, "")
        if not hmac.compare_digest(sent.encode(), self._token(present).encode()):
            return "This form has expired; please try again."
        return None
