"""What a surface answered, and the one normal form all three answers are compared in.

Every client turns its surface's answer into an :class:`Outcome`: the body as a plain
REST-shaped dict, or the error's snake_case code and message, plus the cookies the
answer set or cleared (``Set-Cookie`` headers on HTTP, ``set-cookie`` metadata on gRPC).

:func:`normal_form` is what gets compared across surfaces. proto3 cannot tell a default
value from an absent one, so defaults (``None``, ``""``, ``0``, ``False``, ``[]``,
``{}``) are dropped on every surface alike; values that legitimately differ between two
runs of the same scenario (tokens, ids, timestamps, this run's unique names) are masked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any

#: Keys whose values differ between runs of one scenario; their presence is still compared.
VOLATILE_KEYS = frozenset(
    {
        "access_token",
        "id_token",
        "refresh_token",
        "expires_in",
        "id",
        "user_id",
        "webhook_id",
        "actor_id",
        "resource_id",
        "created_at",
        "updated_at",
        "revoked_timestamp",
        "has_skipped_mfa_setup_at",
        "mfa_locked_at",
        "last_used_at",
        "continuation_token",
        "ip_address",
        "user_agent",
        "request",
        "metadata",
        # token claims
        "nonce",
        "sid",
        "sub",
        "exp",
        "iat",
        "auth_time",
    }
)


@dataclass(frozen=True, slots=True)
class Credentials:
    """What a call presents. ``origin=False`` leaves out the Origin header (HTTP only)."""

    bearer: str | None = None
    cookies: tuple[tuple[str, str], ...] = ()
    admin_secret: str | None = None
    origin: bool = True
    #: Send this HTTP method instead of the operation's own (HTTP only: the 405 rows).
    http_method: str | None = None

    def with_cookies(self, cookies: dict[str, str]) -> Credentials:
        merged = dict(self.cookies) | cookies
        return Credentials(
            bearer=self.bearer,
            cookies=tuple(sorted(merged.items())),
            admin_secret=self.admin_secret,
            origin=self.origin,
            http_method=self.http_method,
        )


NONE = Credentials()


@dataclass(frozen=True, slots=True)
class SetCookie:
    name: str
    value: str
    cleared: bool


@dataclass(slots=True)
class Outcome:
    """One surface's answer to one call."""

    ok: bool
    body: dict[str, Any] = field(default_factory=dict)
    code: str = ""
    message: str = ""
    cookies: tuple[SetCookie, ...] = ()
    #: The surface does not offer the operation at all (404 route, UNIMPLEMENTED).
    offered: bool = True
    #: Surface-level protocol slips (an HTTP status that contradicts the error code...).
    anomalies: tuple[str, ...] = ()
    #: A throttle that changed nothing asked for this wait before the same call again.
    retry_safe_after: float | None = None

    def cookie(self, name: str) -> str | None:
        """The value this answer set for cookie ``name`` (None: not set, or cleared)."""
        for cookie in self.cookies:
            if cookie.name == name and not cookie.cleared:
                return cookie.value
        return None

    def set_cookies(self) -> dict[str, str]:
        return {c.name: c.value for c in self.cookies if not c.cleared}

    def describe(self) -> str:
        cookies = ", ".join(
            f"{c.name}={'<cleared>' if c.cleared else '<set>'}" for c in self.cookies
        )
        suffix = f" cookies[{cookies}]" if cookies else ""
        if not self.offered:
            return f"not offered ({self.code}: {self.message})"
        if self.ok:
            return f"ok {self.body}{suffix}"
        return f"error {self.code}: {self.message!r}{suffix}"


def parse_set_cookie(header: str) -> SetCookie | None:
    """One ``Set-Cookie`` value -> name, value, and whether it clears the cookie."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    for name, morsel in jar.items():
        max_age = morsel["max-age"]
        expires = morsel["expires"]
        cleared = (
            (max_age != "" and int(max_age) <= 0)
            or (max_age == "" and "1970" in expires)
            or not morsel.value
        )
        return SetCookie(name, morsel.value, cleared)
    return None


def _is_default(value: Any) -> bool:
    return value is None or value == "" or value is False or value == 0 or value in ([], {})


def _mask(value: Any, unique: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for token in unique:
            value = value.replace(token, "<unique>")
        return value
    return value


def normal_body(
    value: Any, unique: tuple[str, ...] = (), masked: frozenset[str] = VOLATILE_KEYS
) -> Any:
    """``value`` with proto3 defaults dropped, volatile keys masked, unique names replaced."""
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in sorted(value.items()):
            if _is_default(item):
                continue
            if key in masked and not isinstance(item, (dict, list)):
                result[key] = "<varies>"
                continue
            if (
                key in masked
                and isinstance(item, list)
                and not any(isinstance(i, (dict, list)) for i in item)
            ):
                result[key] = ["<varies>"] * len(item)  # how many, not which
                continue
            normal = normal_body(item, unique, masked)
            if not _is_default(normal):
                result[key] = normal
        return result
    if isinstance(value, list):
        return [normal_body(item, unique, masked) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _mask(value, unique)


def normal_form(
    outcome: Outcome, unique: tuple[str, ...] = (), masked: frozenset[str] = VOLATILE_KEYS
) -> dict[str, Any]:
    """The comparable form of an outcome: body or error, and cookie effects by name."""
    form: dict[str, Any] = {"ok": outcome.ok}
    if outcome.ok:
        form["body"] = normal_body(outcome.body, unique, masked)
    else:
        form["error"] = {"code": outcome.code, "message": _mask(outcome.message, unique)}
    if outcome.cookies:
        form["cookies"] = {c.name: "cleared" if c.cleared else "set" for c in outcome.cookies}
    return form


_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def snake_case(name: str) -> str:
    """``INVALID_ARGUMENT`` / ``InvalidArgument`` -> ``invalid_argument``."""
    if name.isupper():
        return name.lower()
    return _SNAKE.sub("_", name).lower()
