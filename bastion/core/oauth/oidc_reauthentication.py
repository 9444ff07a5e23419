"""OpenID Connect Core §3.1.2.1 ``prompt=login`` and ``max_age``: when ``/authorize`` must
send a signed-in user to log in again, and how it knows, when the browser comes back,
that they did.

The authorize request is stateless across the login page's round trip: the page sends the
browser back to ``/authorize`` with the same query. So the demand travels in that query as
``auth_after=<t>.<mac>``: the time ``t`` the demand was made, bound by an HMAC to the
request's ``state`` (a client cannot forge an answer). A session whose user authenticated
after ``t`` answers it (strictly: times are whole seconds, and a login in the very second of
the demand may have come before it); ``auth_time`` survives session rotations, so only a
new login does.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["PARAM", "answered", "demanded", "derive_key", "marker", "marker_time"]

#: The query parameter that carries the demand through the login page.
PARAM = "auth_after"


def derive_key(secret: str) -> bytes:
    """The marker's MAC key, derived from the client secret (never used raw)."""
    return hmac.new(secret.encode(), b"bastion authorize auth_after", hashlib.sha256).digest()


def demanded(prompt: tuple[str, ...], max_age: int | None, auth_time: int, now: int) -> bool:
    """Must a session whose user authenticated at ``auth_time`` log in again?"""
    return "login" in prompt or (max_age is not None and now - auth_time > max_age)


def marker(key: bytes, state: str, now: int) -> str:
    return f"{now}.{_mac(key, state, now)}"


def marker_time(value: str) -> int | None:
    """The time a marker names, unchecked (for the login page, which decides only whether
    to show its form; ``/authorize`` checks the MAC)."""
    head, dot, _ = value.partition(".")
    return int(head) if dot and head.isdigit() else None


def answered(key: bytes, state: str, value: str | None, auth_time: int) -> bool:
    """Does ``value`` (this request's marker) prove a login after its demand?"""
    if not value:
        return False
    when = marker_time(value)
    if when is None or not hmac.compare_digest(value, marker(key, state, when)):
        return False
    return auth_time > when


def _mac(key: bytes, state: str, when: int) -> str:
    message = f"{when}\x00{state}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:32]
