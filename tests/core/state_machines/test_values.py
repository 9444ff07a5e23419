"""Events and effects validate themselves and keep secrets out of ``repr``."""

from __future__ import annotations

import dataclasses

import pytest

from bastion.core.auth.emails import EmailEvent
from bastion.core.errors import ClientError, Unauthenticated
from bastion.core.state_machines.effects import (
    CreateUser,
    Fail,
    HashPassword,
    IssueTokens,
    LoadStoredToken,
    LoadUser,
    LoadVerificationRequest,
    RehashPassword,
    SendEmail,
    SetSessionCookie,
    VerifyPasswordHash,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    PasswordVerified,
    StoredTokenLoaded,
    UserCreated,
    UserLoaded,
    VerificationRequestCreated,
)
from bastion.core.state_machines.password_reset import ResetPasswordRequested
from bastion.core.state_machines.session import RefreshRequested, SessionRequested
from bastion.core.state_machines.signup import SignupRequested
from tests.core.state_machines.harness import tokens, user

SECRET = "Sup3r$ecret"


@pytest.mark.parametrize(
    "value",
    [
        VerifyPasswordHash(password=SECRET, password_hash=SECRET),
        HashPassword(password=SECRET),
        RehashPassword(user_id="u", password=SECRET),
        SetSessionCookie(value=SECRET),
        LoadVerificationRequest(token=SECRET),
        PasswordHashed(password_hash=SECRET),
        VerificationRequestCreated(token=SECRET),
        StoredTokenLoaded(token=SECRET),
        SignupRequested(email="a@b.io", password=SECRET, confirm_password=SECRET),
        ResetPasswordRequested(token=SECRET, otp=SECRET, password=SECRET, confirm_password=SECRET),
        SessionRequested(cookie=SECRET),
        RefreshRequested(refresh_token=SECRET),
        SendEmail(event=EmailEvent.VERIFY_OTP, to="a@b.io", user=user(), otp=SECRET),
        UserLoaded(user=user(password_hash=SECRET)),
    ],
    ids=lambda v: type(v).__name__,
)
def test_secrets_stay_out_of_repr(value: object) -> None:
    assert SECRET not in repr(value)


def test_tokens_stay_out_of_repr() -> None:
    issued = tokens(refresh=True)
    assert "access.jwt" not in repr(issued)
    assert "session-blob" not in repr(issued)


def test_events_and_effects_are_frozen() -> None:
    event = PasswordVerified(ok=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.ok = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        PasswordVerified(True)  # type: ignore[misc]  # keyword-only


@pytest.mark.parametrize(
    "build",
    [
        lambda: LoadUser(),
        lambda: LoadUser(email="a@b.io", user_id="u"),
        lambda: LoadVerificationRequest(),
        lambda: LoadVerificationRequest(
            token="t", email="a@b.io", identifier=EmailEvent.UPDATE_EMAIL
        ),
        lambda: LoadVerificationRequest(email="a@b.io"),
        lambda: CreateUser(user=user(), lock_keys=()),
        lambda: SendEmail(event=EmailEvent.FORGOT_PASSWORD, to="a@b.io", user=user()),
        lambda: SendEmail(
            event=EmailEvent.VERIFY_OTP, to="a@b.io", user=user(), otp="1", verification_url="u"
        ),
        lambda: PasswordVerified(ok=False, needs_rehash=True),
        lambda: PasswordHashed(password_hash=""),
        lambda: VerificationRequestCreated(token=""),
        lambda: Fail(error=Unauthenticated, message=""),
    ],
)
def test_malformed_values_are_refused(build: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each builder has its own message
        build()  # type: ignore[operator]


def test_fail_builds_the_error_it_names() -> None:
    fail = Fail(error=Unauthenticated, message="invalid credentials")
    error = fail.exception()
    assert isinstance(error, Unauthenticated)
    assert (error.code, error.message) == ("unauthenticated", "invalid credentials")
    with pytest.raises(TypeError):
        Fail(error=ClientError, message="x")


def test_reply_events_are_declared_on_the_effects() -> None:
    assert LoadUser.replies == (UserLoaded,)
    assert CreateUser.replies == (UserCreated, type(CreateUser.replies[1]()))
    assert IssueTokens.replies[0].__name__ == "TokensIssued"
    assert LoadStoredToken.replies == (StoredTokenLoaded,)
    assert SetSessionCookie.replies == ()
