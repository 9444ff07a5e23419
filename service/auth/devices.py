"""The device cookie: proof that this browser signed in to an account before.

Set on every login whose password was right; names the account (a digest of its
normalised identifier, never the identifier) and when it was issued, under an HMAC keyed
from ``--client-secret``. The login throttle holds a client presenting a valid one to the
per-address budget only, so a stranger who spends an account's budget cannot lock its
owner out of a device the owner already uses.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from core.settings import Settings
from service.context import CallerContext, Cookie

__all__ = ["DEVICE_COOKIE", "DeviceCookies"]

DEVICE_COOKIE = "bastion_device"
#: How long a device stays known after its last sign-in.
DEVICE_TTL_SECONDS = 180 * 24 * 3600
_INFO = b"bastion device cookie v1"


def _account(identifier: str) -> str:
    return hashlib.sha256(identifier.encode()).hexdigest()[:32]


class DeviceCookies:
    def __init__(self, settings: Settings) -> None:
        self._key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(
            settings.client_secret.encode()
        )
        self._secure = settings.session_cookie_secure
        self._same_site = settings.session_cookie_same_site

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()[:32]

    def cookie(self, identifier: str, now: float | None = None) -> Cookie:
        payload = f"{_account(identifier)}.{int(now if now is not None else time.time())}"
        return Cookie(
            name=DEVICE_COOKIE,
            value=f"{payload}.{self._mac(payload)}",
            max_age=DEVICE_TTL_SECONDS,
            secure=self._secure,
            same_site=self._same_site,
        )

    def recognises(self, caller: CallerContext, identifier: str) -> bool:
        value = caller.cookies.get(DEVICE_COOKIE, "")
        account, _, rest = value.partition(".")
        issued, _, mac = rest.partition(".")
        if not (account and issued.isdigit() and mac):
            return False
        if not hmac.compare_digest(mac, self._mac(f"{account}.{issued}")):
            return False
        fresh = time.time() - int(issued) < DEVICE_TTL_SECONDS
        return fresh and hmac.compare_digest(account, _account(identifier))
