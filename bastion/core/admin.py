"""The super-admin credential: the shared secret, and the cookie that stands for it.

The ``service-admin`` cookie proves that its holder presented the admin secret without
being the secret: it names a server-side session and carries an HMAC over that name and
its expiry, keyed from the secret. Changing ``--admin-secret`` invalidates every cookie;
logging out deletes the session so the cookie dies at once.
"""

from __future__ import annotations

import functools
import hashlib
import hmac

__all__ = [
    "ADMIN_COOKIE",
    "ADMIN_SESSION_SECONDS",
    "mint_admin_cookie",
    "read_admin_cookie",
    "secret_matches",
]

ADMIN_COOKIE = "service-admin"
ADMIN_SESSION_SECONDS = 3600


def _key(admin_secret: str) -> bytes:
    return hashlib.sha256(b"bastion admin cookie\x00" + admin_secret.encode()).digest()


def _mac(admin_secret: str, session_id: str, expires_at: int) -> str:
    message = f"{session_id}.{expires_at}".encode()
    return hmac.new(_key(admin_secret), message, hashlib.sha256).hexdigest()


def secret_matches(admin_secret: str, presented: str) -> bool:
    """Constant-time, and independent of the presented value's length."""
    given = hashlib.sha256(presented.encode()).digest()
    return hmac.compare_digest(_digest(admin_secret), given)


@functools.lru_cache(maxsize=4)
def _digest(admin_secret: str) -> bytes:
    """The configured secret's digest, computed once (one secret per process, a few in
    tests)."""
    return hashlib.sha256(admin_secret.encode()).digest()


def mint_admin_cookie(admin_secret: str, session_id: str, expires_at: int) -> str:
    return f"{session_id}.{expires_at}.{_mac(admin_secret, session_id, expires_at)}"


def read_admin_cookie(admin_secret: str, value: str, now: float) -> str | None:
    """The session id the cookie names, if its MAC holds and it has not expired."""
    parts = value.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    session_id, expires, mac = parts
    expires_at = int(expires)
    if not hmac.compare_digest(mac, _mac(admin_secret, session_id, expires_at)):
        return None
    if expires_at <= now:
        return None
    return session_id
