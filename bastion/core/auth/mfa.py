"""Multi-factor rules that need no state: which method a login gets, and the challenge.

:class:`MfaPolicy` answers the login flow's ``DecideSecondFactor`` (flags in, method out)
and says when a phone number still needs an SMS code. :class:`Challenge` is what a pending
second factor (or phone verification, or SMS password reset) is: it lives in the memory
store under its id, which is also the value of the ``mfa`` cookie, for exactly
``expires_at - issued_at`` seconds, so any server process can finish it.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from bastion.core.auth.otp import OTP_TTL, PHONE_VERIFICATION_TTL
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.totp import TOTP_CHALLENGE_TTL
from bastion.core.auth.user import SignupMethod, User

__all__ = [
    "DEVICE_METHODS",
    "Challenge",
    "EnrolmentResponse",
    "Method",
    "MfaPolicy",
    "Purpose",
    "challenge_ttl",
    "without_devices",
]


class Method(enum.StrEnum):
    #: a 6-digit code emailed to the user
    EMAIL_OTP = "email_otp"
    #: a 6-digit code texted to the user's phone
    SMS_OTP = "sms_otp"
    #: a code from an authenticator app (or a recovery code)
    TOTP = "totp"
    #: a passkey (WebAuthn assertion), through ``webauthn_login_*`` with the ``mfa`` cookie;
    #: a challenge of this method has no code, and a passkey may answer any login challenge
    WEBAUTHN = "webauthn"


class Purpose(enum.StrEnum):
    #: the second factor of a password login (or a login with a still unverified phone)
    LOGIN = "login"
    #: proving the phone number given at signup
    SIGNUP = "signup"
    #: ``forgot_password`` by phone; only ``reset_password`` may consume it
    PASSWORD_RESET = "password_reset"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MfaPolicy:
    """The multi-factor flags, as the flows decide with them (the server builds it from
    its settings: ``service.auth.parts.mfa_policy_from``).

    A second factor is asked when ``--enable-mfa`` is on and the user has MFA on, or
    ``--enforce-mfa`` is on (enforcement applies once MFA is enabled; the reference's
    defaults, enforce on and MFA off, mean no MFA).
    """

    enable_mfa: bool = False
    enforce_mfa: bool = True
    enable_email_otp: bool = False
    enable_sms_otp: bool = False
    enable_totp_login: bool = False
    enable_phone_verification: bool = False
    #: SMTP host, port and sender are configured
    email_enabled: bool = False
    #: every SMS provider flag is configured
    sms_enabled: bool = False
    #: ``--enable-passkeys``: a user's passkey is a second factor
    enable_webauthn: bool = False

    @property
    def any_method(self) -> bool:
        """At least one second factor can actually be used."""
        return (
            (self.enable_email_otp and self.email_enabled)
            or (self.enable_sms_otp and self.sms_enabled)
            or self.enable_totp_login
        )

    def second_factor(
        self, user: User, channel: SignupMethod, *, has_passkey: bool = False
    ) -> Method | None:
        """The method a password login by ``channel`` must pass, ``None`` for none.

        A phone login whose number still needs proving always gets an SMS code. Then,
        first match wins: a factor the user set up (``enrolled_mfa_methods``, in order), a
        code on the channel the user logged in with, then an authenticator app, then a code
        on the user's other verified channel (so enforced MFA never silently lapses because
        a login came in by the "other" channel), then the user's passkey (``has_passkey``,
        with passkeys on). Whatever the method, the passkey may answer instead; and an
        authenticator app not yet set up is not enrolled for a user with a passkey: the
        MFA flow parks the login for the passkey (``core.state_machines.mfa``, rule 2a).
        """
        if channel is SignupMethod.MOBILE_BASIC_AUTH and self.phone_needs_verification(user):
            return Method.SMS_OTP  # the code proves the number and is the second factor too
        if not self.applies_to(user):
            return None
        known = {m.value: m for m in Method}
        for enrolled in user.enrolled_mfa_methods:  # a factor the user set up comes first
            method = known.get(enrolled)
            if method is None:
                continue
            if method in self.code_methods(user) or (
                method is Method.TOTP and self.enable_totp_login
            ):
                return method
            if method is Method.WEBAUTHN and self.passkey_usable(has_passkey):
                return method
        email_otp = self.enable_email_otp and self.email_enabled and bool(user.email)
        sms_otp = self.enable_sms_otp and self.sms_enabled and bool(user.phone_number)
        if channel is SignupMethod.BASIC_AUTH and email_otp:
            return Method.EMAIL_OTP
        if channel is SignupMethod.MOBILE_BASIC_AUTH and sms_otp:
            return Method.SMS_OTP
        if self.enable_totp_login:
            return Method.TOTP
        if email_otp and user.email_verified:
            return Method.EMAIL_OTP
        if sms_otp and user.phone_number_verified:
            return Method.SMS_OTP
        if self.passkey_usable(has_passkey):
            return Method.WEBAUTHN
        return None

    def applies_to(self, user: User) -> bool:
        """MFA is on for this user (a phone still to prove aside): worth asking whether the
        user has a passkey."""
        if not self.enable_mfa or not (user.is_multi_factor_auth_enabled or self.enforce_mfa):
            return False
        skipped = user.has_skipped_mfa_setup_at is not None and not user.enrolled_mfa_methods
        # the user skipped the unenforced offer (skip_mfa_setup)
        return not (skipped and not self.enforce_mfa)

    def passkey_usable(self, has_passkey: bool) -> bool:
        """A passkey can finish a parked login (``should_offer_webauthn_mfa_verify``)."""
        return has_passkey and self.enable_webauthn

    def code_methods(self, user: User) -> tuple[Method, ...]:
        """The one-time codes this server can send this user (also ``lock_mfa``'s test:
        with one left, locking is refused)."""
        email = self.enable_email_otp and self.email_enabled and bool(user.email)
        sms = self.enable_sms_otp and self.sms_enabled and bool(user.phone_number)
        return tuple(m for m, ok in ((Method.EMAIL_OTP, email), (Method.SMS_OTP, sms)) if ok)

    def working_factors(
        self, user: User, *, verified_authenticator: bool, has_passkey: bool
    ) -> frozenset[Method]:
        """The second factors this user can already pass on this server (issue 36): a
        verified authenticator (with authenticator apps on), a passkey (with passkeys on),
        and a code this server can send that the user set up (``enrolled_mfa_methods``) or
        that MFA (switched on for the user, or enforced) asks on its verified address or
        number. A user
        with one must pass it: enrolling another factor, skipping or locking from a parked
        login by the password alone is refused (``core.state_machines.mfa_setup``)."""
        found = {
            method
            for method, ok in (
                (Method.TOTP, verified_authenticator and self.enable_totp_login),
                (Method.WEBAUTHN, self.passkey_usable(has_passkey)),
            )
            if ok
        }
        mfa_on = self.applies_to(user)  # switched on by the user, or enforced
        proved = {Method.EMAIL_OTP: user.email_verified, Method.SMS_OTP: user.phone_number_verified}
        for method in self.code_methods(user):
            if method.value in user.enrolled_mfa_methods or (mfa_on and proved[method]):
                found.add(method)
        return frozenset(found)

    def setup_offers(self, user: User) -> tuple[Method, ...]:
        """The ``should_offer_*_mfa_setup`` of a parked login: the codes the user could set
        up, while none is set up yet."""
        return () if user.enrolled_mfa_methods else self.code_methods(user)

    def phone_needs_verification(self, user: User) -> bool:
        """Signup or login by phone must first prove the number by SMS."""
        return (
            self.enable_phone_verification
            and self.sms_enabled
            and bool(user.phone_number)
            and not user.phone_number_verified
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Challenge:
    id: str
    user_id: str
    method: Method
    purpose: Purpose
    #: the identifier the flow started from; ``verify_otp`` must name the same one
    email: str | None = None
    phone_number: str | None = None
    #: ``login_method`` of the session the challenge ends in
    login_method: str
    #: ``auth_recipe`` of the login webhook
    auth_recipe: str
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    #: keyed digest of the emailed/texted code (``core.auth.otp``); ``None`` for TOTP
    #: (and for a code challenge until its code is generated)
    code_digest: str | None = dataclasses.field(default=None, repr=False, metadata={"secret": True})
    issued_at: int
    expires_at: int
    #: codes sent so far by this challenge and the ones it replaced
    sends: int = 1
    #: a first authenticator enrolment: the QR code was shown with this challenge
    enrolling: bool = False
    #: issued by an ``*_mfa_setup`` operation: passing it enrols its method
    setup: bool = False

    def __post_init__(self) -> None:
        if not (self.id and self.user_id):
            raise ValueError("a challenge needs an id and a user")
        if self.email is None and self.phone_number is None:
            raise ValueError("a challenge needs the email or phone number it started from")
        if self.method in (Method.TOTP, Method.WEBAUTHN) and self.code_digest is not None:
            raise ValueError("an authenticator or passkey challenge has no code digest")
        if self.expires_at <= self.issued_at:
            raise ValueError("a challenge must live a positive time")

    @property
    def ttl(self) -> int:
        """Its whole lifetime in seconds (also the ``mfa`` cookie's Max-Age)."""
        return self.expires_at - self.issued_at

    def expired(self, now: int) -> bool:
        return now >= self.expires_at

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data.update(
            method=self.method.value,
            purpose=self.purpose.value,
            roles=list(self.roles),
            scope=list(self.scope),
        )
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Challenge:
        names = {f.name for f in dataclasses.fields(cls)}
        data = {"setup": False, **data}  # stored before setup existed
        if set(data) != names:
            raise ValueError(f"challenge fields differ: {sorted(set(data) ^ names)}")
        values = dict(data)
        values.update(
            method=Method(values["method"]),
            purpose=Purpose(values["purpose"]),
            roles=tuple(values["roles"]),
            scope=tuple(values["scope"]),
        )
        return cls(**values)


#: enrolled methods that live on a device (an authenticator app, a passkey), not on an
#: address or number of the account
DEVICE_METHODS = frozenset({Method.TOTP.value, Method.WEBAUTHN.value})


def without_devices(user: User) -> User:
    """``user`` once its passkeys and authenticator are gone (``DeleteUserSessions`` with
    ``end_credentials``): proving an address the account held unverified ends every
    credential someone else may have left on it (issue 36)."""
    kept = tuple(m for m in user.enrolled_mfa_methods if m not in DEVICE_METHODS)
    return dataclasses.replace(user, enrolled_mfa_methods=kept)


def challenge_ttl(method: Method, purpose: Purpose) -> int:
    """How long a challenge (and its ``mfa`` cookie) lives, in seconds."""
    if method in (Method.TOTP, Method.WEBAUTHN):
        return TOTP_CHALLENGE_TTL
    if purpose is Purpose.SIGNUP:
        return PHONE_VERIFICATION_TTL
    return OTP_TTL


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EnrolmentResponse(AuthResponse):
    """Login's answer on a first authenticator enrolment: the QR code (base64 PNG, no
    ``data:`` prefix), the secret for manual entry and the recovery codes, shown once."""

    authenticator_scanner_image: str
    authenticator_secret: str = dataclasses.field(repr=False)
    authenticator_recovery_codes: tuple[str, ...] = dataclasses.field(repr=False)

    def to_api_dict(self) -> dict[str, Any]:
        body = AuthResponse.to_api_dict(self)
        body.update(
            authenticator_scanner_image=self.authenticator_scanner_image,
            authenticator_secret=self.authenticator_secret,
            authenticator_recovery_codes=list(self.authenticator_recovery_codes),
        )
        return body
