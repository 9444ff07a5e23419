"""Authorization codes (RFC 6749 §4.1.2 / §4.1.3) and pending authorize requests.

A code is bound to who logged in (user, granted roles, login method, auth time, and the
session that got it: the code dies with that session) and to the request that asked for
it (redirect URI, scope, OIDC nonce, PKCE challenge). It lives
:data:`CODE_TTL` seconds and is redeemed once: the store takes it atomically, so of two
concurrent redemptions only one finds it; a second redemption revokes the tokens the
first one got (§4.1.2: "the authorization server SHOULD revoke ... all tokens previously
issued based on that authorization code").

A pending request is an authorize request parked while the browser logs in: stored under
its ``state`` so that ``login``/``signup``/``verify_otp``/``session``/``verify_email`` called
with that state bind the pre-announced code to the login (Authorizer's login app).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["CODE_TTL", "PENDING_TTL", "CodeGrant", "PendingAuthorize"]

#: codes and pending requests live 10 minutes (RFC 6749 §4.1.2 recommends at most 10)
CODE_TTL = 600
PENDING_TTL = 600


def _strings(raw: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in raw) if isinstance(raw, list | tuple) else ()


def _text(raw: Any) -> str | None:
    return raw if isinstance(raw, str) and raw else None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CodeGrant:
    user_id: str
    roles: tuple[str, ...]
    scope: tuple[str, ...]
    login_method: str
    redirect_uri: str
    auth_time: int
    nonce: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    #: the session family (its ``sid``) that got the code: logging it out voids the code
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["roles"], data["scope"] = list(self.roles), list(self.scope)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CodeGrant:
        auth_time = data.get("auth_time")
        return cls(
            user_id=str(data["user_id"]),
            roles=_strings(data.get("roles")),
            scope=_strings(data.get("scope")),
            login_method=str(data.get("login_method", "")),
            redirect_uri=str(data["redirect_uri"]),
            auth_time=auth_time if isinstance(auth_time, int) else 0,
            nonce=_text(data.get("nonce")),
            code_challenge=_text(data.get("code_challenge")),
            code_challenge_method=_text(data.get("code_challenge_method")),
            session_id=_text(data.get("session_id")),
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PendingAuthorize:
    """An authorize request waiting for the browser to log in."""

    redirect_uri: str
    scope: tuple[str, ...]
    #: the code announced to the login page, bound when a login carries this state
    code: str | None = None
    nonce: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["scope"] = list(self.scope)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingAuthorize:
        return cls(
            redirect_uri=str(data["redirect_uri"]),
            scope=_strings(data.get("scope")),
            code=_text(data.get("code")),
            nonce=_text(data.get("nonce")),
            code_challenge=_text(data.get("code_challenge")),
            code_challenge_method=_text(data.get("code_challenge_method")),
        )
