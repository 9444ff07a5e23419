"""The reference driver runs whole flows over its memory store, chaining machines through
their handoffs: phone signup -> SMS code, email signup -> link -> verification, magic link,
password reset by email and by phone, refresh, and a TOTP enrolment; an authenticator or
recovery code that another request spends meanwhile is refused and keeps no session."""

from __future__ import annotations

import dataclasses
import random
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyotp
import pytest

from bastion.core.auth import totp
from bastion.core.auth.mfa import EnrolmentResponse, MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.responses import AuthResponse
from bastion.core.errors import BastionError, InvalidArgument
from bastion.core.reference import Argon2Hasher, JwtSigner, MemoryStore, OtpCodes, SyncDriver
from bastion.core.state_machines import (
    Effect,
    Event,
    ForgotPasswordRequested,
    LoginMachine,
    LoginRequested,
    MagicLinkMachine,
    MagicLinkRequested,
    MfaMachine,
    PasswordResetMachine,
    RefreshRequested,
    ResetPasswordRequested,
    SessionMachine,
    SignupMachine,
    SignupRequested,
    TakeChallenge,
    VerificationMachine,
    VerifyEmailRequested,
    VerifyOtpRequested,
)
from tests.core.state_machines.harness import NOW, PHONE, STRONG, CountingIds, FixedClock
from tests.core.state_machines.harness import env as make_env

SECRET = "a-server-secret-of-at-least-32-bytes!"
HASHER = Argon2Hasher(time_cost=1, memory_cost_kib=8)


class SeededRandomness:
    def __init__(self) -> None:
        self._random = random.Random(7)

    def token_bytes(self, n: int) -> bytes:
        return self._random.randbytes(n)

    def randbelow(self, n: int) -> int:
        return self._random.randrange(n)


def driver(mfa: MfaPolicy | None = None, **policy: Any) -> SyncDriver:
    flags = {"email_enabled": True, "sms_enabled": True, **policy}
    return SyncDriver(
        make_env(**flags),
        MemoryStore(),
        hasher=HASHER,
        signer=JwtSigner(SECRET),
        codes=OtpCodes(derive_key(SECRET), SeededRandomness()),
        randomness=SeededRandomness(),
        mfa_policy=mfa,
    )


def fresh(d: SyncDriver, flow: type[Any]) -> Any:
    return flow(d.env)


def token_of(url: str | None) -> str:
    assert url is not None
    return parse_qs(urlparse(url).query)["token"][0]


def test_a_phone_signup_hands_over_to_the_sms_code_that_completes_it() -> None:
    d = driver(enable_phone_verification=True)
    signup = SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG)
    sent = d.run(fresh(d, SignupMachine), signup)
    assert isinstance(sent, AuthResponse)
    assert sent.should_show_mobile_otp_screen
    (text,) = d.store.outbox.texts
    code = text.body.rsplit(" ", 1)[-1]
    verify = VerifyOtpRequested(challenge_id=d.cookies["mfa"], code=code, phone_number=PHONE)
    done = d.run(fresh(d, MfaMachine), verify)
    assert isinstance(done, AuthResponse)
    assert done.access_token
    (user,) = d.store.users.values()
    assert user.phone_number_verified
    assert d.store.sessions, "the session was kept"


def test_an_email_signup_link_signs_in_through_the_verification_flow() -> None:
    d = driver(enable_email_verification=True)
    signup = SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG)
    d.run(fresh(d, SignupMachine), signup)
    (mail,) = d.store.outbox.mails
    done = d.run(
        fresh(d, VerificationMachine), VerifyEmailRequested(token=token_of(mail.verification_url))
    )
    assert isinstance(done, AuthResponse)
    assert done.access_token
    assert next(iter(d.store.users.values())).email_verified
    with pytest.raises(BastionError, match="invalid verification token"):
        d.run(
            fresh(d, VerificationMachine),
            VerifyEmailRequested(token=token_of(mail.verification_url)),
        )


def test_a_magic_link_creates_the_account_and_signs_in() -> None:
    d = driver(enable_magic_link_login=True)
    d.run(fresh(d, MagicLinkMachine), MagicLinkRequested(email="bob@example.com"))
    (mail,) = d.store.outbox.mails
    done = d.run(
        fresh(d, VerificationMachine), VerifyEmailRequested(token=token_of(mail.verification_url))
    )
    assert isinstance(done, AuthResponse)
    assert done.user is not None
    assert done.user.email == "bob@example.com"


def test_a_password_reset_by_email_replaces_the_password_and_ends_sessions() -> None:
    d = driver()
    d.run(
        fresh(d, SignupMachine),
        SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG),
    )
    assert d.store.sessions
    d.run(fresh(d, PasswordResetMachine), ForgotPasswordRequested(email="ann@example.com"))
    mail = d.store.outbox.mails[-1]
    new = "N3w-Passw0rd!"
    reset = ResetPasswordRequested(
        token=token_of(mail.verification_url), password=new, confirm_password=new
    )
    d.run(fresh(d, PasswordResetMachine), reset)
    assert not d.store.sessions
    with pytest.raises(BastionError, match="invalid credentials"):
        d.run(fresh(d, LoginMachine), LoginRequested(email="ann@example.com", password=STRONG))
    done = d.run(fresh(d, LoginMachine), LoginRequested(email="ann@example.com", password=new))
    assert isinstance(done, AuthResponse)
    assert done.access_token


def test_a_password_reset_by_phone_hands_over_to_the_sms_code() -> None:
    d = driver()
    d.run(
        fresh(d, SignupMachine),
        SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG),
    )
    d.run(fresh(d, PasswordResetMachine), ForgotPasswordRequested(phone_number=PHONE))
    code = d.store.outbox.texts[-1].body.rsplit(" ", 1)[-1]
    new = "N3w-Passw0rd!"
    reset = ResetPasswordRequested(
        challenge_id=d.cookies["mfa"],
        otp=code,
        phone_number=PHONE,
        password=new,
        confirm_password=new,
    )
    d.run(fresh(d, PasswordResetMachine), reset)
    done = d.run(fresh(d, LoginMachine), LoginRequested(phone_number=PHONE, password=new))
    assert isinstance(done, AuthResponse)
    assert done.access_token


def test_a_refresh_token_rotates_once() -> None:
    d = driver()
    signup = SignupRequested(
        email="ann@example.com",
        password=STRONG,
        confirm_password=STRONG,
        scope=("openid", "offline_access"),
    )
    first = d.run(fresh(d, SignupMachine), signup)
    assert isinstance(first, AuthResponse)
    assert first.refresh_token
    claims = d.signer.verify(first.refresh_token)
    refresh = RefreshRequested(refresh_token=first.refresh_token, claims=claims)
    again = d.run(fresh(d, SessionMachine), refresh)
    assert again.to_api_dict()["access_token"]
    with pytest.raises(BastionError):
        d.run(fresh(d, SessionMachine), refresh)


def test_two_logins_through_one_driver_get_two_session_families() -> None:
    """One driver serves many requests: each login starts its own family (``sid``); a
    refresh keeps the family of the session it refreshes."""
    d = driver()
    sids = []
    for email in ("ann@example.com", "bob@example.com"):
        signup = SignupRequested(
            email=email,
            password=STRONG,
            confirm_password=STRONG,
            scope=("openid", "offline_access"),
        )
        answer = d.run(fresh(d, SignupMachine), signup)
        assert isinstance(answer, AuthResponse)
        assert answer.refresh_token
        sids.append(d.signer.verify(answer.access_token)["sid"])
        refresh_claims = d.signer.verify(answer.refresh_token)
        refreshed = d.run(
            fresh(d, SessionMachine),
            RefreshRequested(refresh_token=answer.refresh_token, claims=refresh_claims),
        )
        assert d.signer.verify(refreshed.to_api_dict()["access_token"])["sid"] == sids[-1]
    assert sids[0] != sids[1]


def test_a_totp_login_enrols_then_accepts_the_authenticator_code() -> None:
    clock = FixedClock(at=NOW)
    d = driver(MfaPolicy(enable_mfa=True, enforce_mfa=True, enable_totp_login=True))
    d.env = dataclasses.replace(d.env, clock=clock, ids=CountingIds())
    d.run(
        fresh(d, SignupMachine),
        SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG),
    )
    shown = d.run(fresh(d, LoginMachine), LoginRequested(email="ann@example.com", password=STRONG))
    secret = shown.to_api_dict()["authenticator_secret"]
    code = pyotp.TOTP(secret).at(NOW)
    verify = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"], code=code, is_totp=True, email="ann@example.com"
    )
    done = d.run(fresh(d, MfaMachine), verify)
    assert isinstance(done, AuthResponse)
    assert done.access_token
    assert next(iter(d.store.authenticators.values())).verified


@pytest.mark.parametrize("kind", ["authenticator", "recovery_code"])
def test_a_code_spent_by_another_request_meanwhile_is_refused_and_keeps_no_session(
    kind: str,
) -> None:
    """The code is checked against the authenticator loaded, and spent in the final
    commit: spent by another request in between (here, as the challenge is taken), that
    commit refuses with "invalid otp" and the session kept for the sign-in is dropped."""
    d = driver(MfaPolicy(enable_mfa=True, enforce_mfa=True, enable_totp_login=True))
    d.env = dataclasses.replace(d.env, clock=FixedClock(at=NOW), ids=CountingIds())
    d.run(
        fresh(d, SignupMachine),
        SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG),
    )
    login = LoginRequested(email="ann@example.com", password=STRONG)
    shown = d.run(fresh(d, LoginMachine), login)
    assert isinstance(shown, EnrolmentResponse)
    secret, codes = shown.authenticator_secret, shown.authenticator_recovery_codes
    first = pyotp.TOTP(secret).at(NOW)
    enrol = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"], code=first, is_totp=True, email="ann@example.com"
    )
    d.run(fresh(d, MfaMachine), enrol)
    d.run(fresh(d, LoginMachine), login)
    code = pyotp.TOTP(secret).at(NOW + totp.STEP_SECONDS) if kind == "authenticator" else codes[0]
    ((user_id, found),) = d.store.authenticators.items()
    spent_elsewhere = dataclasses.replace(
        found,
        last_used_step=NOW // totp.STEP_SECONDS + 1,
        recovery_digests=tuple(
            d for d in found.recovery_digests if d != totp.recovery_digest(codes[0])
        ),
    )
    sessions = set(d.store.sessions)
    answer = d.answer

    def racing(effect: Effect) -> Event:
        if isinstance(effect, TakeChallenge):
            d.store.authenticators[user_id] = spent_elsewhere
        return answer(effect)

    d.answer = racing  # type: ignore[method-assign]
    verify = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"], code=code, is_totp=True, email="ann@example.com"
    )
    with pytest.raises(InvalidArgument, match="invalid otp"):
        d.run(fresh(d, MfaMachine), verify)
    assert set(d.store.sessions) == sessions
    assert d.store.authenticators[user_id] == spent_elsewhere
