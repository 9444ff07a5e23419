"""The user as the flows see it, and the identity rules every flow shares.

:class:`User` carries the public API fields of the reference (§2.3) plus the two stored
facts the flows decide with: the password hash (never in ``repr`` nor in the API dict) and
the verification timestamps behind ``email_verified`` / ``phone_number_verified``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import idna

from bastion.core.limits import TEXT_LIMITS

__all__ = [
    "SignupMethod",
    "User",
    "has_control_character",
    "identifier_digest",
    "identity_lock_key",
    "identity_lock_keys",
    "is_valid_email",
    "is_valid_phone_number",
    "normalise_email",
]


class SignupMethod(enum.StrEnum):
    """How an account was created or later gained a credential (``signup_methods``)."""

    #: email + password
    BASIC_AUTH = "basic_auth"
    #: phone number + password
    MOBILE_BASIC_AUTH = "mobile_basic_auth"
    #: passwordless emailed link
    MAGIC_LINK_LOGIN = "magic_link_login"
    #: phone number proven by an SMS one-time password
    MOBILE_OTP = "mobile_otp"


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
#: The reference only asks a phone number to be at least 10 characters long.
_MIN_PHONE_LENGTH = 10
_MAX_EMAIL_LENGTH = TEXT_LIMITS["email"]


def normalise_email(email: str) -> str:
    """The one form an address is stored and looked up in, so that look-alikes meet.

    The local part is NFKC-normalised and case-folded (fullwidth ``x`` is ``x``, ``ß`` is ``ss``);
    the domain is mapped by IDNA (UTS #46: width, case, compatibility forms) to its
    Unicode form, its trailing dot dropped (``x.io.`` is ``x.io``). A domain IDNA refuses
    keeps the NFKC, case-folded form (and fails :func:`is_valid_email`).
    """
    folded = unicodedata.normalize("NFKC", email.strip())
    local, at, domain = folded.rpartition("@")
    if not at:
        return folded.casefold()
    domain = domain.rstrip(".").casefold()
    with contextlib.suppress(idna.IDNAError, UnicodeError):
        domain = idna.decode(idna.encode(domain, uts46=True))
    return f"{local.casefold()}@{domain}"


def has_control_character(text: str) -> bool:
    """NUL, other C0/C1 controls, or format characters: never part of an identifier."""
    return any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in text)


def is_valid_email(email: str) -> bool:
    """Shape, length, no control character, and a domain IDNA (UTS #46, STD3 rules)
    accepts: ``a@-x.io`` and ``a@x..io`` are refused."""
    if (
        len(email) > _MAX_EMAIL_LENGTH
        or _EMAIL.match(email) is None
        or has_control_character(email)
    ):
        return False
    domain = email.rpartition("@")[2].rstrip(".")
    try:
        idna.encode(domain, uts46=True, std3_rules=True)
    except (idna.IDNAError, UnicodeError):
        return False
    return True


def is_valid_phone_number(phone_number: str) -> bool:
    return len(phone_number.strip()) >= _MIN_PHONE_LENGTH and not has_control_character(
        phone_number
    )


def identifier_digest(identifier: str) -> str:
    """A short, stable digest of a normalised identifier: what a cookie names an account by,
    so the cookie never carries the address itself."""
    return hashlib.sha256(identifier.encode()).hexdigest()[:32]


def identity_lock_key(*, email: str | None = None, phone_number: str | None = None) -> str:
    """The name of the per-identity lock taken around check-then-insert of a user."""
    if email:
        return f"email:{normalise_email(email)}"
    if phone_number:
        return f"phone:{phone_number.strip()}"
    raise ValueError("an identity needs an email or a phone number")


def identity_lock_keys(
    *, email: str | None = None, phone_number: str | None = None
) -> tuple[str, ...]:
    """The locks held around checking that an email AND a phone number are free and writing
    them: each is unique on its own, so both (none when neither is given)."""
    keys = (
        identity_lock_key(email=email) if email else None,
        identity_lock_key(phone_number=phone_number) if phone_number else None,
    )
    return tuple(key for key in keys if key is not None)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class User:
    id: str
    email: str | None = None
    email_verified_at: int | None = None
    phone_number: str | None = None
    phone_number_verified_at: int | None = None
    password_hash: str | None = dataclasses.field(default=None, repr=False)
    signup_methods: tuple[str, ...] = ()
    given_name: str | None = None
    family_name: str | None = None
    middle_name: str | None = None
    nickname: str | None = None
    gender: str | None = None
    birthdate: str | None = None
    picture: str | None = None
    roles: tuple[str, ...] = ()
    created_at: int | None = None
    updated_at: int | None = None
    revoked_timestamp: int | None = None
    is_multi_factor_auth_enabled: bool | None = None
    app_data: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)
    #: second factors the user set up (``email_otp``, ``sms_otp``, ``totp``), in that order
    enrolled_mfa_methods: tuple[str, ...] = ()
    #: when the user chose to skip MFA setup at an unenforced offer
    has_skipped_mfa_setup_at: int | None = None
    #: when the user locked their MFA (no factor left to use); an admin's ``reset_mfa`` ends it
    mfa_locked_at: int | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a user needs an id")
        if any(isinstance(v, str) for v in (self.roles, self.signup_methods)) or isinstance(
            self.enrolled_mfa_methods, str
        ):
            raise TypeError("roles, signup_methods and enrolled_mfa_methods are tuples of strings")

    @property
    def email_verified(self) -> bool:
        return self.email_verified_at is not None

    @property
    def phone_number_verified(self) -> bool:
        return self.phone_number_verified_at is not None

    @property
    def is_revoked(self) -> bool:
        return self.revoked_timestamp is not None

    def has_signup_method(self, method: SignupMethod) -> bool:
        return method.value in self.signup_methods

    def with_signup_method(self, method: SignupMethod) -> User:
        if self.has_signup_method(method):
            return self
        return dataclasses.replace(self, signup_methods=(*self.signup_methods, method.value))

    def to_api_dict(self) -> dict[str, Any]:
        """The ``User`` object of the GraphQL/REST/gRPC surfaces (reference §2.3)."""
        return {
            "id": self.id,
            "email": self.email,
            "email_verified": self.email_verified,
            "signup_methods": ",".join(self.signup_methods),
            "given_name": self.given_name,
            "family_name": self.family_name,
            "middle_name": self.middle_name,
            "nickname": self.nickname,
            "preferred_username": self.email,
            "gender": self.gender,
            "birthdate": self.birthdate,
            "phone_number": self.phone_number,
            "phone_number_verified": self.phone_number_verified,
            "picture": self.picture,
            "roles": list(self.roles),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "revoked_timestamp": self.revoked_timestamp,
            "is_multi_factor_auth_enabled": self.is_multi_factor_auth_enabled,
            "app_data": dict(self.app_data),
            "has_skipped_mfa_setup_at": self.has_skipped_mfa_setup_at,
            "mfa_locked_at": self.mfa_locked_at,
            "enrolled_mfa_methods": list(self.enrolled_mfa_methods),
        }

    def to_dict(self) -> dict[str, Any]:
        """Every stored field, as plain data (for parking a flow); includes the hash."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["signup_methods"] = list(self.signup_methods)
        data["roles"] = list(self.roles)
        data["enrolled_mfa_methods"] = list(self.enrolled_mfa_methods)
        data["app_data"] = dict(self.app_data)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> User:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown user fields: {sorted(unknown)}")
        values = dict(data)
        values["signup_methods"] = tuple(values.get("signup_methods", ()))
        values["roles"] = tuple(values.get("roles", ()))
        values["enrolled_mfa_methods"] = tuple(values.get("enrolled_mfa_methods", ()))
        values["app_data"] = dict(values.get("app_data") or {})
        return cls(**values)
