"""Effects and result events of the authorize flow
(:mod:`core.state_machines.oauth_authorize`): answering at the redirect URI, parking a
request for the login page, and storing, taking and checking codes.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bastion.core.oauth.rfc6749_authorize import ResponseMode
from bastion.core.oauth.rfc6749_code import CodeGrant, PendingAuthorize
from bastion.core.state_machines._machine import Effect, Event

__all__ = [
    "CheckSession",
    "CodeTaken",
    "Deliver",
    "RedirectToLogin",
    "RememberCodeTokens",
    "RevokeCodeTokens",
    "SessionChecked",
    "StoreCode",
    "StorePending",
    "TakeCode",
]

# -- result events ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CodeTaken(Event):
    """Answer to ``TakeCode``: the grant, or None when unknown, expired or used."""

    grant: CodeGrant | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionChecked(Event):
    """Answer to ``CheckSession``."""

    alive: bool


# -- effects ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Deliver(Effect):
    """Answer the authorize request at ``redirect_uri`` through ``mode``."""

    redirect_uri: str
    mode: ResponseMode
    params: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RedirectToLogin(Effect):
    """Send the browser to the login page (its sign-up page for ``screen_hint=signup``)
    with these query parameters."""

    params: tuple[tuple[str, str], ...]
    signup: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StorePending(Effect):
    state: str
    pending: PendingAuthorize


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreCode(Effect):
    code: str = dataclasses.field(repr=False)
    grant: CodeGrant


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TakeCode(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (CodeTaken,)
    code: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CheckSession(Effect):
    """Is the user's session family ``sid`` still live (not logged out, not revoked)?"""

    replies: ClassVar[tuple[type[Event], ...]] = (SessionChecked,)
    user_id: str
    sid: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RevokeCodeTokens(Effect):
    """End the session a first redemption of ``code`` created, if any."""

    code: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RememberCodeTokens(Effect):
    """Remember which session ``code`` created, for ``RevokeCodeTokens``."""

    code: str = dataclasses.field(repr=False)
    user_id: str
    nonce: str
