"""The authentication operations' requests: one frozen dataclass per operation, read
from the wire by :mod:`service.requests` (field types say how)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bastion.core.errors import InvalidArgument
from bastion.service.requests import wire

__all__ = [
    "DeactivateAccountRequest",
    "ForgotPasswordRequest",
    "LoginRequest",
    "LogoutRequest",
    "MagicLinkLoginRequest",
    "MfaSetupRequest",
    "ProfileRequest",
    "ResendOtpRequest",
    "ResendVerifyEmailRequest",
    "ResetPasswordRequest",
    "RevokeRequest",
    "SessionRequest",
    "SignupRequest",
    "SkipMfaSetupRequest",
    "UndoEmailChangeRequest",
    "UpdateProfileRequest",
    "ValidateJwtTokenRequest",
    "ValidateSessionRequest",
    "VerifyEmailRequest",
    "VerifyOtpRequest",
    "relations",
]


def relations(wire_form: Mapping[str, Any], name: str) -> tuple[tuple[str, str], ...]:
    """``required_relations``: (relation, object) pairs, each both non-empty."""
    raw = wire_form.get(name)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidArgument(f"{name} must be a list")
    found = []
    for item in raw:
        if not isinstance(item, dict):
            raise InvalidArgument("each required relation needs relation and object")
        relation, obj = item.get("relation"), item.get("object")
        if not isinstance(relation, str) or not isinstance(obj, str) or not relation or not obj:
            raise InvalidArgument("each required relation needs relation and object")
        found.append((relation, obj))
    return tuple(found)


_RELATIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["relation", "object"],
        "properties": {"relation": {"type": "string"}, "object": {"type": "string"}},
    },
}


def required_relations() -> Any:
    return wire(read=relations, schema=_RELATIONS_SCHEMA, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class SignupRequest:
    email: str | None = None
    phone_number: str | None = None
    password: str = ""
    confirm_password: str = ""
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    redirect_uri: str | None = None
    state: str | None = None
    given_name: str | None = None
    family_name: str | None = None
    middle_name: str | None = None
    nickname: str | None = None
    gender: str | None = None
    birthdate: str | None = None
    picture: str | None = None
    is_multi_factor_auth_enabled: bool | None = None
    app_data: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginRequest:
    email: str | None = None
    phone_number: str | None = None
    password: str = ""
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOtpRequest:
    otp: str = ""
    is_totp: bool = False
    email: str | None = None
    phone_number: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResendOtpRequest:
    email: str | None = None
    phone_number: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MfaSetupRequest:
    """``email_otp_mfa_setup``, ``sms_otp_mfa_setup``, ``totp_mfa_setup``, ``lock_mfa``:
    the identifier of the login the ``mfa`` cookie continues."""

    email: str | None = None
    phone_number: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SkipMfaSetupRequest:
    email: str | None = None
    phone_number: str | None = None
    #: Authorizer's field (an OAuth state to carry); the parked login already carries it
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MagicLinkLoginRequest:
    email: str = ""
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    state: str | None = None
    redirect_uri: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyEmailRequest:
    token: str = ""
    state: str | None = None
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ResendVerifyEmailRequest:
    email: str = ""
    identifier: str = ""
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgotPasswordRequest:
    email: str | None = None
    phone_number: str | None = None
    state: str | None = None
    redirect_uri: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetPasswordRequest:
    token: str | None = None
    otp: str | None = None
    phone_number: str | None = None
    password: str = ""
    confirm_password: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    state: str | None = None
    required_relations: tuple[tuple[str, str], ...] = required_relations()


@dataclass(frozen=True, slots=True, kw_only=True)
class RevokeRequest:
    refresh_token: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UndoEmailChangeRequest:
    """The token of the link mailed to the old address (:mod:`service.auth.email_undo`)."""

    token: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogoutRequest:
    """Logout reads nothing but the caller's session."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRequest:
    """The profile is the caller's own: nothing to read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeactivateAccountRequest:
    """Deactivation ends the caller's own account: nothing to read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateProfileRequest:
    given_name: str | None = None
    family_name: str | None = None
    middle_name: str | None = None
    nickname: str | None = None
    gender: str | None = None
    birthdate: str | None = None
    picture: str | None = None
    app_data: dict[str, Any] | None = None
    old_password: str = ""
    new_password: str = ""
    confirm_new_password: str = ""
    email: str | None = None
    phone_number: str | None = None
    is_multi_factor_auth_enabled: bool | None = None
    regenerate_recovery_codes: bool | None = None
    #: the current second factor's code, when the MFA change needs a fresh one
    otp: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateJwtTokenRequest:
    token_type: str = ""
    token: str = ""
    roles: tuple[str, ...] = ()
    required_relations: tuple[tuple[str, str], ...] = required_relations()


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateSessionRequest:
    cookie: str = ""
    roles: tuple[str, ...] = ()
    required_relations: tuple[tuple[str, str], ...] = required_relations()
