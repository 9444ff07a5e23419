"""Which second factor a login gets, when a phone needs an SMS code, and the challenge
value that the memory store keeps."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bastion.core.auth import otp, totp
from bastion.core.auth.mfa import Challenge, Method, MfaPolicy, Purpose, challenge_ttl
from bastion.core.auth.user import SignupMethod, User

EMAIL, PHONE = SignupMethod.BASIC_AUTH, SignupMethod.MOBILE_BASIC_AUTH
ALL = {
    "enable_mfa": True,
    "enable_email_otp": True,
    "enable_sms_otp": True,
    "enable_totp_login": True,
    "email_enabled": True,
    "sms_enabled": True,
}


def person(**kw: Any) -> User:
    base: dict[str, Any] = {
        "id": "u",
        "email": "ann@example.com",
        "email_verified_at": 1,
        "phone_number": "+15551234567",
        "phone_number_verified_at": 1,
        "is_multi_factor_auth_enabled": True,
    }
    return User(**{**base, **kw})


def test_the_reference_defaults_mean_no_mfa() -> None:
    policy = MfaPolicy()
    assert policy.enforce_mfa
    assert not policy.enable_mfa
    assert policy.second_factor(person(), EMAIL) is None
    assert not policy.any_method


@pytest.mark.parametrize(
    ("flags", "user", "channel", "method"),
    [
        ({}, person(), EMAIL, Method.EMAIL_OTP),
        ({}, person(), PHONE, Method.SMS_OTP),
        ({"enable_email_otp": False}, person(), EMAIL, Method.TOTP),
        ({"enable_sms_otp": False}, person(), PHONE, Method.TOTP),
        ({"email_enabled": False}, person(), EMAIL, Method.TOTP),
        ({"sms_enabled": False}, person(), PHONE, Method.TOTP),
        # no code on the login's channel and no authenticator app: the other verified one
        ({"enable_totp_login": False, "enable_email_otp": False}, person(), EMAIL, Method.SMS_OTP),
        ({"enable_totp_login": False, "enable_sms_otp": False}, person(), PHONE, Method.EMAIL_OTP),
        (
            {"enable_totp_login": False, "enable_sms_otp": False},
            person(email_verified_at=None),
            PHONE,
            None,
        ),
        ({"enable_mfa": False}, person(), EMAIL, None),
        # enforced: even a user who has MFA off (or never chose) is challenged
        ({}, person(is_multi_factor_auth_enabled=False), EMAIL, Method.EMAIL_OTP),
        ({}, person(is_multi_factor_auth_enabled=None), PHONE, Method.SMS_OTP),
        # optional: only users who turned it on
        ({"enforce_mfa": False}, person(is_multi_factor_auth_enabled=False), EMAIL, None),
        (
            {"enforce_mfa": False},
            person(is_multi_factor_auth_enabled=True),
            EMAIL,
            Method.EMAIL_OTP,
        ),
    ],
)
def test_second_factor_first_match_wins(
    flags: dict[str, bool], user: User, channel: SignupMethod, method: Method | None
) -> None:
    assert MfaPolicy(**{**ALL, **flags}).second_factor(user, channel) is method


def test_any_method_needs_the_service_behind_it() -> None:
    assert MfaPolicy(enable_mfa=True, enable_totp_login=True).any_method
    assert not MfaPolicy(enable_mfa=True, enable_email_otp=True).any_method
    assert MfaPolicy(enable_mfa=True, enable_email_otp=True, email_enabled=True).any_method
    assert not MfaPolicy(enable_mfa=True, enable_sms_otp=True).any_method
    assert MfaPolicy(enable_mfa=True, enable_sms_otp=True, sms_enabled=True).any_method


def test_phone_needs_verification() -> None:
    on = MfaPolicy(enable_phone_verification=True, sms_enabled=True)
    assert on.phone_needs_verification(person(phone_number_verified_at=None))
    assert not on.phone_needs_verification(person())
    assert not on.phone_needs_verification(person(phone_number=None, phone_number_verified_at=None))
    off = MfaPolicy(enable_phone_verification=True, sms_enabled=False)
    assert not off.phone_needs_verification(person(phone_number_verified_at=None))


def sample(**kw: Any) -> Challenge:
    base: dict[str, Any] = {
        "id": "ch",
        "user_id": "u",
        "method": Method.SMS_OTP,
        "purpose": Purpose.SIGNUP,
        "phone_number": "+15551234567",
        "login_method": "mobile_otp",
        "auth_recipe": "mobile_basic_auth",
        "roles": ("user",),
        "scope": ("openid",),
        "code_digest": "d" * 64,
        "issued_at": 100,
        "expires_at": 700,
    }
    return Challenge(**{**base, **kw})


def test_challenge_round_trips_as_json() -> None:
    c = sample(oauth_state="s", sends=2)
    assert Challenge.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert c.ttl == 600
    assert not c.expired(699)
    assert c.expired(700)
    assert "d" * 64 not in repr(c)


def test_challenge_refuses_damage() -> None:
    data = sample().to_dict()
    with pytest.raises(ValueError, match="fields differ"):
        Challenge.from_dict({**data, "is_admin": True})
    with pytest.raises(ValueError, match="fields differ"):
        Challenge.from_dict({k: v for k, v in data.items() if k != "user_id"})
    with pytest.raises(ValueError, match="carrier-pigeon"):
        Challenge.from_dict({**data, "method": "carrier-pigeon"})
    with pytest.raises(ValueError, match="positive time"):
        sample(expires_at=100)
    with pytest.raises(ValueError, match="email or phone"):
        sample(phone_number=None)
    with pytest.raises(ValueError, match="no code digest"):
        sample(method=Method.TOTP)
    with pytest.raises(ValueError, match="an id and a user"):
        sample(id="")


def test_challenge_lifetimes() -> None:
    assert challenge_ttl(Method.TOTP, Purpose.LOGIN) == totp.TOTP_CHALLENGE_TTL == 300
    assert challenge_ttl(Method.SMS_OTP, Purpose.SIGNUP) == otp.PHONE_VERIFICATION_TTL
    assert challenge_ttl(Method.SMS_OTP, Purpose.PASSWORD_RESET) == otp.OTP_TTL
    assert challenge_ttl(Method.EMAIL_OTP, Purpose.LOGIN) == otp.OTP_TTL
