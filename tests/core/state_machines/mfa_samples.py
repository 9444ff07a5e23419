"""Fixtures and a finite set of sample events for the MFA machine (the generic harness's
style: the usual value first, then one deviation at a time)."""

from __future__ import annotations

from typing import Any

import pyotp

from bastion.core.auth import otp, totp
from bastion.core.auth.mfa import Challenge, Method, Purpose
from bastion.core.auth.totp import Authenticator
from bastion.core.auth.user import SignupMethod
from bastion.core.state_machines._machine import Event
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.mfa import (
    ChallengeRequested,
    ResendOtpRequested,
    VerifyOtpRequested,
)
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CodeChecked,
    CodeGenerated,
)
from tests.core.state_machines.harness import EMAIL, NOW, PHONE, tokens, user, variants

CHALLENGE_ID = "ch-1"
CODE = "918273"
DIGEST = "d" * 64
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
#: the authenticator code for SECRET at NOW
TOTP_NOW = pyotp.TOTP(SECRET).at(NOW)
RECOVERY = "ABCDE-FGHIJ-KLMNO-PQRST"
RECOVERY_DIGEST = totp.recovery_digest(RECOVERY)
CURRENT_STEP = NOW // totp.STEP_SECONDS
ENROL_CODES = ("AAAAA-BBBBB-CCCCC-DDDDD", "EEEEE-FFFFF-GGGGG-HHHHH")
#: values that must never show in an effect's repr
SECRETS = (CODE, TOTP_NOW, RECOVERY, SECRET, *ENROL_CODES)


def account(**overrides: Any) -> Any:
    base: dict[str, Any] = {
        "phone_number": PHONE,
        "phone_number_verified_at": NOW - 100,
        "signup_methods": ("basic_auth", "mobile_basic_auth"),
        "is_multi_factor_auth_enabled": True,
    }
    base.update(overrides)
    return user(**base)


def challenge(**overrides: Any) -> Challenge:
    base: dict[str, Any] = {
        "id": CHALLENGE_ID,
        "user_id": "user-1",
        "method": Method.EMAIL_OTP,
        "purpose": Purpose.LOGIN,
        "email": EMAIL,
        "login_method": "basic_auth",
        "auth_recipe": "basic_auth",
        "roles": ("user",),
        "scope": ("openid", "email", "profile"),
        "code_digest": DIGEST,
        "issued_at": NOW - 60,
        "expires_at": NOW - 60 + otp.OTP_TTL,
    }
    base.update(overrides)
    return Challenge(**base)


def sms_challenge(**overrides: Any) -> Challenge:
    base: dict[str, Any] = {
        "method": Method.SMS_OTP,
        "email": None,
        "phone_number": PHONE,
        "login_method": "mobile_otp",
        "auth_recipe": "mobile_basic_auth",
    }
    return challenge(**{**base, **overrides})


def totp_challenge(**overrides: Any) -> Challenge:
    return challenge(**{"method": Method.TOTP, "code_digest": None, **overrides})


def passkey_challenge(**overrides: Any) -> Challenge:
    return challenge(**{"method": Method.WEBAUTHN, "code_digest": None, **overrides})


def authenticator(**overrides: Any) -> Authenticator:
    base: dict[str, Any] = {
        "user_id": "user-1",
        "secret": SECRET,
        "verified": True,
        "last_used_step": CURRENT_STEP - 5,
        "recovery_digests": (RECOVERY_DIGEST,),
    }
    base.update(overrides)
    return Authenticator(**base)


_VERIFY = {"challenge_id": CHALLENGE_ID, "code": CODE, "email": EMAIL}
_RESEND = {"challenge_id": CHALLENGE_ID, "email": EMAIL}
_CHALLENGE = {"user": account(), "method": Method.EMAIL_OTP}

SAMPLES: dict[type[Event], list[Event]] = {
    ChallengeRequested: [
        *variants(
            ChallengeRequested,
            _CHALLENGE,
            method=[Method.TOTP],
            roles=[("user", "editor")],
            scope=[("openid", "offline_access")],
            state=["authz-state"],
        ),
        ChallengeRequested(
            user=account(), method=Method.SMS_OTP, channel=SignupMethod.MOBILE_BASIC_AUTH
        ),
        ChallengeRequested(
            user=account(phone_number_verified_at=None),
            method=Method.SMS_OTP,
            purpose=Purpose.SIGNUP,
            channel=SignupMethod.MOBILE_BASIC_AUTH,
        ),
        ChallengeRequested(
            user=account(),
            method=Method.SMS_OTP,
            purpose=Purpose.PASSWORD_RESET,
            channel=SignupMethod.MOBILE_BASIC_AUTH,
        ),
        ChallengeRequested(
            user=account(email=None), method=Method.TOTP, channel=SignupMethod.MOBILE_BASIC_AUTH
        ),
        # the user's passkey: the only factor, or offered beside a code
        ChallengeRequested(user=account(), method=Method.WEBAUTHN, passkey=True),
        ChallengeRequested(user=account(), method=Method.EMAIL_OTP, passkey=True),
        ChallengeRequested(user=account(), method=Method.TOTP, passkey=True),
    ],
    CodeGenerated: [CodeGenerated(code=CODE, digest=DIGEST)],
    AuthenticatorLoaded: [
        AuthenticatorLoaded(authenticator=authenticator()),
        AuthenticatorLoaded(authenticator=None),
        AuthenticatorLoaded(authenticator=authenticator(verified=False, recovery_digests=())),
        AuthenticatorLoaded(authenticator=authenticator(last_used_step=CURRENT_STEP + 1)),
    ],
    AuthenticatorEnrolled: [AuthenticatorEnrolled(secret=SECRET, recovery_codes=ENROL_CODES)],
    VerifyOtpRequested: [
        *variants(
            VerifyOtpRequested,
            _VERIFY,
            challenge_id=[None],
            email=[None, "  ANN@example.com", "eve@example.com"],
            code=["654321", RECOVERY],
        ),
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code=TOTP_NOW, is_totp=True, email=EMAIL),
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code=RECOVERY, is_totp=True, email=EMAIL),
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code="000000", is_totp=True, email=EMAIL),
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code=CODE, phone_number=PHONE),
    ],
    ResendOtpRequested: [
        *variants(ResendOtpRequested, _RESEND, challenge_id=[None], email=[None]),
        ResendOtpRequested(challenge_id=CHALLENGE_ID, phone_number=PHONE),
    ],
    ChallengeLoaded: [
        ChallengeLoaded(challenge=challenge()),
        ChallengeLoaded(challenge=None),
        ChallengeLoaded(challenge=challenge(expires_at=NOW)),
        ChallengeLoaded(challenge=challenge(email="eve@example.com")),
        ChallengeLoaded(challenge=challenge(sends=otp.MAX_SENDS)),
        ChallengeLoaded(challenge=challenge(issued_at=NOW - 5, expires_at=NOW + 295)),
        ChallengeLoaded(challenge=sms_challenge()),
        ChallengeLoaded(
            challenge=sms_challenge(purpose=Purpose.SIGNUP, expires_at=NOW + otp.OTP_TTL)
        ),
        ChallengeLoaded(challenge=sms_challenge(purpose=Purpose.PASSWORD_RESET)),
        ChallengeLoaded(challenge=totp_challenge()),
        ChallengeLoaded(challenge=totp_challenge(enrolling=True)),
        ChallengeLoaded(challenge=passkey_challenge()),
    ],
    AttemptCounted: [
        AttemptCounted(attempts=1),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS + 1),
    ],
    CodeChecked: [CodeChecked(ok=True), CodeChecked(ok=False)],
    ChallengeTaken: [ChallengeTaken(ok=True), ChallengeTaken(ok=False)],
    UserLoaded: [
        UserLoaded(user=account()),
        UserLoaded(user=None),
        UserLoaded(user=account(revoked_timestamp=NOW - 5)),
        UserLoaded(user=account(email_verified_at=None)),
        UserLoaded(user=account(phone_number_verified_at=None)),
    ],
    TokensIssued: [TokensIssued(tokens=tokens()), TokensIssued(tokens=tokens(refresh=True))],
}

ALL_EVENT_TYPES: tuple[type[Event], ...] = tuple(SAMPLES)


def _find(event_type: type[Event], **fields: Any) -> Event:
    for event in SAMPLES[event_type]:
        inner = getattr(event, "challenge", None) or getattr(event, "authenticator", None) or event
        if all(getattr(inner, k, None) == v for k, v in fields.items()):
            return event
    raise LookupError(f"no {event_type.__name__} sample with {fields}")


#: What a run usually answers, per story (other samples are still drawn half the time).
SCENARIOS: list[dict[type[Event], Event]] = [
    {},  # email code, the first sample of each list
    {
        ChallengeRequested: _find(ChallengeRequested, method=Method.TOTP),
        VerifyOtpRequested: _find(VerifyOtpRequested, code=TOTP_NOW),
        ChallengeLoaded: _find(ChallengeLoaded, method=Method.TOTP, enrolling=False),
    },
    {
        VerifyOtpRequested: _find(VerifyOtpRequested, code=RECOVERY, is_totp=True),
        ChallengeLoaded: _find(ChallengeLoaded, method=Method.TOTP, enrolling=False),
    },
    {  # an authenticator set up at login: enrolled, then its first code completes it
        ChallengeRequested: _find(ChallengeRequested, method=Method.TOTP),
        AuthenticatorLoaded: _find(AuthenticatorLoaded, verified=False),
        VerifyOtpRequested: _find(VerifyOtpRequested, code=TOTP_NOW),
        ChallengeLoaded: _find(ChallengeLoaded, method=Method.TOTP, enrolling=True),
    },
    {
        ChallengeRequested: _find(ChallengeRequested, purpose=Purpose.SIGNUP),
        VerifyOtpRequested: _find(VerifyOtpRequested, phone_number=PHONE),
        ResendOtpRequested: _find(ResendOtpRequested, phone_number=PHONE),
        ChallengeLoaded: _find(ChallengeLoaded, method=Method.SMS_OTP, purpose=Purpose.LOGIN),
    },
]
