"""What a flow answers with (the ``result`` of a ``Respond`` effect).

Each value knows its wire dictionary; transports only rename nothing and render it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bastion.core.auth.user import User

__all__ = [
    "AuthResponse",
    "ForgotPasswordResponse",
    "IssuedTokens",
    "MessageResponse",
    "TokenResponse",
]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IssuedTokens:
    """What the runtime minted for an ``IssueTokens`` effect (signed, not yet stored)."""

    nonce: str
    access_token: str = dataclasses.field(repr=False)
    id_token: str = dataclasses.field(repr=False)
    refresh_token: str | None = dataclasses.field(default=None, repr=False)
    #: the encrypted browser-session blob, value of ``cookie_session``
    session_token: str = dataclasses.field(repr=False)
    expires_in: int

    def __post_init__(self) -> None:
        if not (self.nonce and self.access_token and self.id_token and self.session_token):
            raise ValueError("issued tokens need a nonce, access, id and session token")
        if self.expires_in < 1:
            raise ValueError("expires_in must be at least 1")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MessageResponse:
    message: str

    def to_api_dict(self) -> dict[str, Any]:
        return {"message": self.message}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ForgotPasswordResponse:
    message: str
    should_show_mobile_otp_screen: bool = False

    def to_api_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "should_show_mobile_otp_screen": self.should_show_mobile_otp_screen,
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthResponse:
    message: str
    user: User | None = None
    access_token: str | None = dataclasses.field(default=None, repr=False)
    id_token: str | None = dataclasses.field(default=None, repr=False)
    refresh_token: str | None = dataclasses.field(default=None, repr=False)
    expires_in: int | None = None
    should_show_email_otp_screen: bool = False
    should_show_mobile_otp_screen: bool = False
    should_show_totp_screen: bool = False
    #: a parked login may set these codes up instead (``*_mfa_setup``)
    should_offer_email_otp_mfa_setup: bool = False
    should_offer_sms_otp_mfa_setup: bool = False
    #: a parked login the user's passkey can finish (``webauthn_login_options`` with the
    #: ``mfa`` cookie)
    should_offer_webauthn_mfa_verify: bool = False

    @classmethod
    def with_tokens(
        cls, message: str, user: User, tokens: IssuedTokens, *, include_id_token: bool = True
    ) -> AuthResponse:
        return cls(
            message=message,
            user=user,
            access_token=tokens.access_token,
            id_token=tokens.id_token if include_id_token else None,
            refresh_token=tokens.refresh_token,
            expires_in=tokens.expires_in,
        )

    def to_api_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "should_show_email_otp_screen": self.should_show_email_otp_screen,
            "should_show_mobile_otp_screen": self.should_show_mobile_otp_screen,
            "should_show_totp_screen": self.should_show_totp_screen,
            "should_offer_email_otp_mfa_setup": self.should_offer_email_otp_mfa_setup,
            "should_offer_sms_otp_mfa_setup": self.should_offer_sms_otp_mfa_setup,
            "should_offer_webauthn_mfa_verify": self.should_offer_webauthn_mfa_verify,
            "access_token": self.access_token,
            "id_token": self.id_token,
            "refresh_token": self.refresh_token,
            "expires_in": self.expires_in,
            "user": None if self.user is None else self.user.to_api_dict(),
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TokenResponse:
    """``POST /oauth/token`` (refresh grant) JSON."""

    access_token: str = dataclasses.field(repr=False)
    id_token: str = dataclasses.field(repr=False)
    refresh_token: str | None = dataclasses.field(default=None, repr=False)
    scope: Sequence[str]
    roles: Sequence[str]
    expires_in: int

    def to_api_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "id_token": self.id_token,
            "scope": " ".join(self.scope),
            "roles": list(self.roles),
            "expires_in": self.expires_in,
        }
        if self.refresh_token is not None:
            body["refresh_token"] = self.refresh_token
        return body
