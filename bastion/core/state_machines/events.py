"""Events the driver feeds back after carrying out an effect (shared by every flow).

A flow's own request events (``LoginRequested`` ...) live in its module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.auth.verification import VerificationRequest
from bastion.core.state_machines._machine import Event

__all__ = [
    "PasswordHashed",
    "PasswordVerified",
    "RelationsChecked",
    "StoredTokenLoaded",
    "TokensIssued",
    "UserAlreadyExists",
    "UserCreated",
    "UserLoaded",
    "VerificationRequestCreated",
    "VerificationRequestLoaded",
]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UserLoaded(Event):
    """Answer to ``LoadUser``: the user, or ``None`` when there is none."""

    user: User | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PasswordVerified(Event):
    """Answer to ``VerifyPasswordHash``. ``needs_rehash``: the stored hash uses an older
    scheme (an imported bcrypt hash) and should be replaced now that we know the password."""

    ok: bool
    needs_rehash: bool = False

    def __post_init__(self) -> None:
        if self.needs_rehash and not self.ok:
            raise ValueError("only a matching password can be rehashed")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PasswordHashed(Event):
    password_hash: str = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if not self.password_hash:
            raise ValueError("empty password hash")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UserCreated(Event):
    user: User


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UserAlreadyExists(Event):
    """``CreateUser`` found the email or phone number taken (checked under the lock)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TokensIssued(Event):
    tokens: IssuedTokens


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerificationRequestCreated(Event):
    """The signed verification JWT of the stored request."""

    token: str = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("empty verification token")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerificationRequestLoaded(Event):
    """Answer to ``LoadVerificationRequest``. ``claims`` are the token's claims once its
    signature has been verified, ``None`` when it was missing, forged or unreadable."""

    request: VerificationRequest | None
    claims: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredTokenLoaded(Event):
    """Answer to ``LoadStoredToken``: the stored value, ``None`` when absent."""

    token: str | None = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RelationsChecked(Event):
    """Answer to ``CheckRequiredRelations``: every relation holds."""

    allowed: bool
