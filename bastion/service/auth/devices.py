"""Cookies that tie a browser to an account: stateless, an HMAC keyed from
``--client-secret`` over a digest of the account's normalised identifier (never the
identifier) and the time of issue.

- The device cookie (``bastion_device``), set on every login whose password was right:
  the login throttle holds a client presenting a valid one to the per-address budget only,
  so a stranger who spends an account's budget cannot lock its owner out of a device the
  owner already uses.
- The signer cookie (``bastion_signup``), set on a signup: the browser that chose the
  password. A verification link followed from that browser keeps the password; followed
  from anywhere else it proves the address but not that its owner chose the password,
  which then goes (a stranger may have signed up with someone else's address).
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


class AccountCookies:
    """One kind of account-naming cookie: ``name``, lifetime, and a key of its own
    (HKDF ``info``: a cookie of one kind never passes for the other)."""

    def __init__(self, settings: Settings, *, name: str, ttl: int, info: bytes) -> None:
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
            settings.client_secret.encode()
        )
        self._name = name
        self._ttl = ttl
        self._secure = settings.session_cookie_secure
        self._same_site = settings.session_cookie_same_site

    @classmethod
    def devices(cls, settings: Settings) -> AccountCookies:
        return cls(
            settings, name=DEVICE_COOKIE, ttl=DEVICE_TTL_SECONDS, info=b"bastion device cookie v1"
        )

    @classmethod
    def signers(cls, settings: Settings) -> AccountCookies:
        return cls(
            settings, name=SIGNER_COOKIE, ttl=SIGNER_TTL_SECONDS, info=b"bastion signer cookie v1"
        )

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()[:32]

    def cookie(self, identifier: str, now: float | None = None) -> Cookie:
        payload = f"{identifier_digest(identifier)}.{int(now if now is not None else time.time())}"
        return Cookie(
            name=self._name,
            value=f"{payload}.{self._mac(payload)}",
            max_age=self._ttl,
            secure=self._secure,
            same_site=self._same_site,
        )

    def account(self, caller: CallerContext) -> str | None:
        """The account digest a valid, fresh cookie of this kind names, if one came."""
        value = caller.cookies.get(self._name, "")
        account, _, rest = value.partition(".")
        issued, _, mac = rest.partition(".")
        if not (account and issued.isdigit() and mac):
            return None
        if not hmac.compare_digest(mac, self._mac(f"{account}.{issued}")):
            return None
        return account if time.time() - int(issued) < self._ttl else None

    def recognises(self, caller: CallerContext, identifier: str) -> bool:
        account = self.account(caller)
        return account is not None and hmac.compare_digest(account, identifier_digest(identifier))
