"""Cookies that tie a browser to an account: stateless, ``<user id>.<issued>.<mac>``, the
MAC an HMAC under a key of bastion's own (HKDF of ``--admin-secret``, which stays on the
server: relying parties hold ``--client-secret``, and with it could forge these).

- The device cookie (``bastion_device``), set on every login whose password was right:
  the login throttle holds a client presenting a valid one to the per-address budget only,
  so a stranger who spends an account's budget cannot lock its owner out of a device the
  owner already uses. Its MAC also covers a digest of the identifier it signed in with
  (never in the cookie), so it is checked before any lookup.
- The signer cookie (``bastion_signup``), set on a signup: the browser that chose the
  password. A verification link followed from that browser keeps the password; followed
  from anywhere else it proves the address but not that its owner chose the password,
  which then goes (a stranger may have signed up with someone else's address).

A cookie dated in the future (beyond a minute of clock skew) or older than its lifetime
is no cookie. Rotating ``--admin-secret`` forgets every such cookie: known devices share
the login throttle's budget again until their next login, and a signup's link followed
from its own browser then drops the password (the owner sets one by a reset).
"""

from __future__ import annotations

import hashlib
import hmac
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bastion.core.auth.user import identifier_digest
from bastion.core.settings import Settings
from bastion.service.context import CallerContext, Cookie

__all__ = ["DEVICE_COOKIE", "SIGNER_COOKIE", "AccountCookies"]

DEVICE_COOKIE = "bastion_device"
SIGNER_COOKIE = "bastion_signup"
#: How long a device stays known after its last sign-in.
DEVICE_TTL_SECONDS = 180 * 24 * 3600
#: How long after a signup its browser still counts as the signer (resent links included).
SIGNER_TTL_SECONDS = 7 * 24 * 3600
#: How far in the future an issue time may lie (the clocks of a fleet's processes).
CLOCK_SKEW_SECONDS = 60


class AccountCookies:
    """One kind of account-naming cookie: ``name``, lifetime, and a key of its own
    (HKDF ``info``: a cookie of one kind never passes for the other)."""

    def __init__(self, settings: Settings, *, name: str, ttl: int, info: bytes) -> None:
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
            settings.admin_secret.encode()
        )
        self._name = name
        self._ttl = ttl
        self._secure = settings.session_cookie_secure
        self._same_site = settings.session_cookie_same_site

    @classmethod
    def devices(cls, settings: Settings) -> AccountCookies:
        return cls(
            settings, name=DEVICE_COOKIE, ttl=DEVICE_TTL_SECONDS, info=b"bastion device cookie v2"
        )

    @classmethod
    def signers(cls, settings: Settings) -> AccountCookies:
        return cls(
            settings, name=SIGNER_COOKIE, ttl=SIGNER_TTL_SECONDS, info=b"bastion signer cookie v2"
        )

    def _mac(self, user_id: str, issued: str, identifier: str | None) -> str:
        bound = f"{user_id}.{issued}"
        if identifier is not None:
            bound += f".{identifier_digest(identifier)}"
        return hmac.new(self._key, bound.encode(), hashlib.sha256).hexdigest()[:32]

    def cookie(
        self, user_id: str, *, identifier: str | None = None, now: float | None = None
    ) -> Cookie:
        """The cookie naming ``user_id`` (and, in its MAC, ``identifier``)."""
        issued = str(int(now if now is not None else time.time()))
        return Cookie(
            name=self._name,
            value=f"{user_id}.{issued}.{self._mac(user_id, issued, identifier)}",
            max_age=self._ttl,
            secure=self._secure,
            same_site=self._same_site,
        )

    def _named(self, caller: CallerContext, identifier: str | None) -> str | None:
        parts = caller.cookies.get(self._name, "").split(".")
        if len(parts) != 3:
            return None
        user_id, issued, mac = parts
        if not (user_id and issued.isdigit() and mac):
            return None
        if not hmac.compare_digest(mac, self._mac(user_id, issued, identifier)):
            return None
        age = time.time() - int(issued)
        return user_id if -CLOCK_SKEW_SECONDS <= age < self._ttl else None

    def account(self, caller: CallerContext) -> str | None:
        """The user id a valid, fresh cookie of this kind (issued without an identifier)
        names, if one came."""
        return self._named(caller, None)

    def recognises(self, caller: CallerContext, identifier: str) -> bool:
        """Did this browser sign in with ``identifier`` (a valid, fresh cookie issued for
        it)?"""
        return self._named(caller, identifier) is not None
