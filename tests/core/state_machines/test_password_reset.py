"""forgot_password and reset_password by emailed link."""

from __future__ import annotations

import pytest

from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.responses import ForgotPasswordResponse, MessageResponse
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateVerificationRequest,
    DeleteUserSessions,
    DeleteVerificationRequest,
    Fail,
    HashPassword,
    LoadUser,
    LoadVerificationRequest,
    Respond,
    SendEmail,
    UpdateUser,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from bastion.core.state_machines.password_reset import (
    RESET_LINK_SENT,
    ForgotPasswordRequested,
    PasswordResetMachine,
    ResetPasswordRequested,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import (
    EMAIL,
    NOW,
    PHONE,
    STRONG,
    URL,
    env,
    link_claims,
    request_row,
    user,
)

MAIL = {"email_enabled": True}
SENT = Respond(result=ForgotPasswordResponse(message=RESET_LINK_SENT))
ROW = request_row(EmailEvent.FORGOT_PASSWORD)
LOADED = VerificationRequestLoaded(request=ROW, claims=link_claims(ROW))
RESET = ResetPasswordRequested(token="link.jwt", password=STRONG, confirm_password=STRONG)


def test_forgot_password_mails_a_reset_link() -> None:
    machine, account = PasswordResetMachine(env(**MAIL)), user()
    steps = drive(
        machine,
        ForgotPasswordRequested(email=EMAIL),
        UserLoaded(user=account),
        VerificationRequestCreated(token="link.jwt"),
    )
    assert steps == [
        [LoadUser(email=EMAIL)],
        [
            CreateVerificationRequest(
                email=EMAIL,
                identifier=EmailEvent.FORGOT_PASSWORD,
                nonce="id-1",
                redirect_uri=f"{URL}/app/reset-password",
                issued_at=NOW,
                expires_at=NOW + 1800,
            )
        ],
        [
            SendEmail(
                event=EmailEvent.FORGOT_PASSWORD,
                to=EMAIL,
                user=account,
                verification_url=f"{URL}/app/reset-password?token=link.jwt",
            ),
            AuditRecord(
                action=AuditAction.FORGOT_PASSWORD_REQUESTED,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
            ),
            SENT,
        ],
    ]
    assert machine.state is State.DONE


def test_redirect_preference_request_then_flag_then_default() -> None:
    def redirect(policy: dict[str, object], asked: str | None) -> str:
        effects = last(
            PasswordResetMachine(env(**MAIL, **policy)),
            ForgotPasswordRequested(email=EMAIL, redirect_uri=asked),
            UserLoaded(user=user()),
        )
        assert isinstance(effects[0], CreateVerificationRequest)
        return effects[0].redirect_uri

    flag = {"reset_password_url": "https://app.example.com/reset"}
    assert redirect(flag, "https://app.example.com/mine") == "https://app.example.com/mine"
    assert redirect(flag, None) == "https://app.example.com/reset"
    assert redirect({}, None) == f"{URL}/app/reset-password"


@pytest.mark.parametrize("account", [None, user(revoked_timestamp=1)], ids=["unknown", "revoked"])
def test_forgot_password_says_the_same_and_sends_nothing(account: object) -> None:
    effects = last(
        PasswordResetMachine(env(**MAIL)),
        ForgotPasswordRequested(email=EMAIL),
        UserLoaded(user=account),  # type: ignore[arg-type]
    )
    assert effects == [SENT]


@pytest.mark.parametrize(
    ("request_", "policy", "error", "message"),
    [
        (ForgotPasswordRequested(), MAIL, InvalidArgument, "email or phone number is required"),
        (ForgotPasswordRequested(phone_number=PHONE), MAIL, FailedPrecondition,
         "SMS service not enabled"),
        (ForgotPasswordRequested(email=EMAIL), {"enable_basic_authentication": False, **MAIL},
         FailedPrecondition, "basic authentication is disabled for this instance"),
        (ForgotPasswordRequested(email=EMAIL), {}, FailedPrecondition,
         "email service not enabled"),
        (ForgotPasswordRequested(email="nope"), MAIL, InvalidArgument, "invalid email address"),
    ],
)  # fmt: skip
def test_forgot_password_checks(
    request_: ForgotPasswordRequested, policy: dict[str, bool], error: type, message: str
) -> None:
    assert PasswordResetMachine(env(**policy)).handle(request_) == [
        Fail(error=error, message=message)
    ]


def test_reset_sets_the_password_then_ends_every_session() -> None:
    """The audit row is queued before the sessions end: it commits with the password."""
    machine, account = PasswordResetMachine(env(enforce_mfa=False)), user(email_verified_at=None)
    steps = drive(
        machine,
        RESET,
        LOADED,
        UserLoaded(user=account),
        PasswordHashed(password_hash="$argon2id$new"),
    )
    updated = user(password_hash="$argon2id$new", email_verified_at=NOW, updated_at=NOW)
    assert steps == [
        [LoadVerificationRequest(token="link.jwt")],
        [LoadUser(email=EMAIL)],
        [HashPassword(password=STRONG)],
        [
            UpdateUser(user=updated),
            DeleteVerificationRequest(request_id="vr-1"),
            AuditRecord(
                action=AuditAction.PASSWORD_RESET,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
            ),
            # the address was unverified: the reset proves it, every credential ends
            DeleteUserSessions(user_id="user-1", end_links=True, end_credentials=True),
            Respond(result=MessageResponse(message="Password updated successfully.")),
        ],
    ]
    assert not machine.holds_secret


def test_a_reset_of_a_verified_address_keeps_the_devices() -> None:
    """Issue 36: only proving an address the account held unverified ends the passkeys and
    the authenticator (and drops them from the enrolled methods)."""
    for verified, ends in ((NOW - 100, False), (None, True)):
        account = user(email_verified_at=verified, enrolled_mfa_methods=("totp", "email_otp"))
        done = last(
            PasswordResetMachine(env(enforce_mfa=False)),
            RESET,
            LOADED,
            UserLoaded(user=account),
            PasswordHashed(password_hash="$argon2id$new"),
        )
        update, ended = done[0], done[3]
        assert isinstance(update, UpdateUser)
        assert isinstance(ended, DeleteUserSessions)
        assert ended.end_credentials is ends
        kept = ("email_otp",) if ends else ("totp", "email_otp")
        assert update.user.enrolled_mfa_methods == kept


def test_reset_adds_basic_auth_to_a_passwordless_account() -> None:
    account = user(signup_methods=("magic_link_login",), password_hash=None)
    effects = last(
        PasswordResetMachine(env()),
        RESET,
        LOADED,
        UserLoaded(user=account),
        PasswordHashed(password_hash="h"),
    )
    assert isinstance(effects[0], UpdateUser)
    assert effects[0].user.signup_methods == ("magic_link_login", "basic_auth")
    assert effects[0].user.is_multi_factor_auth_enabled is True


def test_token_is_checked_before_the_passwords() -> None:
    mismatch = ResetPasswordRequested(token="t", password=STRONG, confirm_password="other")
    bad = VerificationRequestLoaded(request=ROW, claims=link_claims(ROW, nonce="forged"))
    assert last(PasswordResetMachine(env()), mismatch, bad) == [
        Fail(error=InvalidArgument, message="invalid token")
    ]
    assert last(PasswordResetMachine(env()), mismatch, LOADED) == [
        Fail(error=InvalidArgument, message="passwords don't match")
    ]
    weak = ResetPasswordRequested(token="t", password="abcdefg", confirm_password="abcdefg")
    effects = last(PasswordResetMachine(env()), weak, LOADED)
    assert isinstance(effects[0], Fail)
    assert effects[0].message.startswith("password is not valid")


def test_signup_links_cannot_reset_a_password() -> None:
    row = request_row(EmailEvent.BASIC_AUTH_SIGNUP)
    loaded = VerificationRequestLoaded(request=row, claims=link_claims(row))
    assert last(PasswordResetMachine(env()), RESET, loaded) == [
        Fail(error=InvalidArgument, message="invalid token")
    ]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (ResetPasswordRequested(password=STRONG, confirm_password=STRONG),
         "token or otp is required"),
        (ResetPasswordRequested(otp="X", password=STRONG, confirm_password=STRONG),
         "phone number is required"),
    ],
)  # fmt: skip
def test_reset_checks(request_: ResetPasswordRequested, message: str) -> None:
    assert PasswordResetMachine(env()).handle(request_) == [
        Fail(error=InvalidArgument, message=message)
    ]
