"""The application session cookies: an AES-GCM sealed session reference, set as a pair.

The value of ``cookie_session`` / ``cookie_session_domain`` is the session blob of
reference §5.3: the session claims (``sub``, ``roles``, ``scope``, ``nonce``, ``sid``,
``iat``, ``exp``, ``login_method``) as JSON, sealed with AES-256-GCM under a key derived
from ``--client-secret`` (HKDF-SHA256), a random 96-bit nonce in front, base64url. It is a
reference to the stored session, never a token: the server also keeps the exact value
in the memory store and compares, so a sealed blob outlives neither logout nor rotation.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bastion.core.settings import Settings
from bastion.service.context import CallerContext, Cookie

__all__ = [
    "MFA_COOKIE",
    "MFA_DOMAIN_COOKIE",
    "SESSION_COOKIE",
    "SESSION_DOMAIN_COOKIE",
    "SessionCookies",
    "cookie_domain_for",
]

SESSION_COOKIE = "cookie_session"
SESSION_DOMAIN_COOKIE = "cookie_session_domain"
#: The pending MFA challenge's id (host and domain variants), alive as long as the challenge.
MFA_COOKIE = "mfa"
MFA_DOMAIN_COOKIE = "mfa_domain"
_NONCE_BYTES = 12
_INFO = b"bastion session cookie v1"


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cookie_domain_for(settings: Settings) -> str:
    """``--cookie-domain``, else the last two labels of ``--url``'s host (an IP address or
    a one-label host such as ``localhost`` stays as it is)."""
    if settings.cookie_domain:
        return settings.cookie_domain
    host = urlsplit(settings.url).hostname or "localhost"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.split(".")
        return ".".join(labels[-2:])
    return host


class SessionCookies:
    def __init__(self, settings: Settings) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            settings.client_secret.encode()
        )
        self._aead = AESGCM(key)
        self._secure = settings.session_cookie_secure
        self._same_site = settings.session_cookie_same_site
        self._domain = cookie_domain_for(settings)

    # -- the sealed value -----------------------------------------------------------------

    def seal(self, claims: Mapping[str, Any]) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        plain = json.dumps(dict(claims), separators=(",", ":")).encode()
        return _b64encode(nonce + self._aead.encrypt(nonce, plain, SESSION_COOKIE.encode()))

    def open(self, value: str) -> dict[str, Any] | None:
        """The session claims, or None for anything forged, truncated or garbled."""
        try:
            raw = _b64decode(value)
        except (binascii.Error, ValueError):
            return None
        if len(raw) <= _NONCE_BYTES:
            return None
        try:
            plain = self._aead.decrypt(
                raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], SESSION_COOKIE.encode()
            )
            claims = json.loads(plain)
        except (InvalidTag, ValueError):
            return None
        return claims if isinstance(claims, dict) else None

    # -- Set-Cookie -----------------------------------------------------------------------

    def _pair(
        self,
        value: str,
        max_age: int,
        names: tuple[str, str] = (SESSION_COOKIE, SESSION_DOMAIN_COOKIE),
    ) -> tuple[Cookie, Cookie]:
        common = {
            "value": value,
            "max_age": max_age,
            "secure": self._secure,
            "same_site": self._same_site,
        }
        return (
            Cookie(name=names[0], **common),  # type: ignore[arg-type]
            Cookie(name=names[1], domain=self._domain, **common),  # type: ignore[arg-type]
        )

    def set(self, value: str, max_age: int) -> tuple[Cookie, Cookie]:
        return self._pair(value, max_age)

    def clear(self) -> tuple[Cookie, Cookie]:
        return self._pair("", 0)

    def set_mfa(self, challenge_id: str, max_age: int) -> tuple[Cookie, Cookie]:
        return self._pair(challenge_id, max_age, (MFA_COOKIE, MFA_DOMAIN_COOKIE))

    def clear_mfa(self) -> tuple[Cookie, Cookie]:
        return self._pair("", 0, (MFA_COOKIE, MFA_DOMAIN_COOKIE))

    @staticmethod
    def presented_mfa(caller: CallerContext) -> str | None:
        """The ``mfa`` cookie the caller sent: the host cookie, else the domain one."""
        return caller.cookies.get(MFA_COOKIE) or caller.cookies.get(MFA_DOMAIN_COOKIE)

    @staticmethod
    def presented(caller: CallerContext) -> str | None:
        """The session cookie the caller sent: the host cookie, else the domain one."""
        return caller.cookies.get(SESSION_COOKIE) or caller.cookies.get(SESSION_DOMAIN_COOKIE)
