"""The phone parts of signup, login and password reset: each parks for the MFA flow,
which texts the code; ``reset_password`` spends a password-reset code itself."""

from __future__ import annotations

import dataclasses

import pytest

from bastion.core.auth import otp
from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import Method, MfaPolicy, Purpose
from bastion.core.auth.responses import ForgotPasswordResponse, MessageResponse
from bastion.core.auth.user import SignupMethod
from bastion.core.errors import FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    DeleteUserSessions,
    EmitWebhook,
    Fail,
    HashPassword,
    LoadUser,
    Respond,
    UpdateUser,
    VerifyPasswordHash,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    PasswordVerified,
    TokensIssued,
    UserCreated,
    UserLoaded,
)
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import (
    DecideSecondFactor,
    LoginMachine,
    LoginRequested,
    SecondFactorNotRequired,
)
from bastion.core.state_machines.login import State as LoginState
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CountAttempt,
    DropChallenge,
    LoadChallenge,
    SetMfaCookie,
    TakeChallenge,
)
from bastion.core.state_machines.password_reset import (
    ForgotPasswordRequested,
    PasswordResetMachine,
    ResetPasswordRequested,
)
from bastion.core.state_machines.password_reset import State as ResetState
from bastion.core.state_machines.signup import (
    SignupMachine,
    SignupRequested,
    challenge_after_signup,
)
from bastion.core.state_machines.signup import State as SignupState
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import (
    NOW,
    PHONE,
    SMS_CODE,
    STRONG,
    env,
    reset_challenge,
    tokens,
    user,
)

SMS = {"sms_enabled": True, "enable_phone_verification": True}
CODE_SENT = ForgotPasswordResponse(
    message="Please enter the OTP sent to your phone number and change your password.",
    should_show_mobile_otp_screen=True,
)
INVALID_SESSION = Fail(error=Unauthenticated, message="invalid session")
INVALID_OTP = Fail(error=InvalidArgument, message="invalid otp")


def phone_user(**overrides: object) -> object:
    base: dict[str, object] = {
        "email": None,
        "email_verified_at": None,
        "phone_number": PHONE,
        "phone_number_verified_at": NOW - 100,
        "signup_methods": ("mobile_basic_auth",),
    }
    return user(**{**base, **overrides})


# -- signup -------------------------------------------------------------------------------


def test_phone_signup_with_verification_parks_unverified_for_the_sms_code() -> None:
    machine = SignupMachine(env(**SMS))
    request = SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG)
    steps = drive(machine, request, PasswordHashed(password_hash="$argon2id$new"))
    create = steps[1][0]
    assert isinstance(create, CreateUser)
    assert create.user.phone_number_verified_at is None
    effects = last(machine, UserCreated(user=create.user))
    challenge = ChallengeRequested(
        user=create.user,
        method=Method.SMS_OTP,
        purpose=Purpose.SIGNUP,
        channel=SignupMethod.MOBILE_BASIC_AUTH,
        roles=("user",),
        scope=DEFAULT_SCOPE,
    )
    assert effects == [
        EmitWebhook(event=WebhookEvent.CREATED, user=create.user),
        AuditRecord(action=AuditAction.SIGNUP, actor_id="id-1", resource_id="id-1"),
        StartChallenge(request=challenge),
    ]
    assert machine.state is SignupState.PHONE_VERIFICATION_REQUIRED
    assert challenge_after_signup(machine.ctx) == challenge


@pytest.mark.parametrize(
    "policy", [{"sms_enabled": True}, {"enable_phone_verification": True}], ids=["off", "no-sms"]
)
def test_phone_signup_without_phone_verification_counts_the_number_verified(
    policy: dict[str, bool],
) -> None:
    machine = SignupMachine(env(**policy))
    request = SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG)
    hashed = PasswordHashed(password_hash="$argon2id$new")
    create = last(machine, request, hashed, TokensIssued(tokens=tokens()))[-1]
    assert isinstance(create, CreateUser)
    assert create.user.phone_number_verified_at == NOW
    with pytest.raises(ValueError, match="no phone number to prove"):
        challenge_after_signup(machine.ctx)


def test_with_email_verification_too_the_link_comes_first_and_the_number_stays_unproved() -> None:
    machine = SignupMachine(env(**SMS, enable_email_verification=True, email_enabled=True))
    request = SignupRequested(
        email="ann@example.com", phone_number=PHONE, password=STRONG, confirm_password=STRONG
    )
    create = last(machine, request, PasswordHashed(password_hash="$argon2id$new"))[0]
    assert isinstance(create, CreateUser)
    assert create.user.phone_number_verified_at is None
    assert create.user.email_verified_at is None
    assert machine.ctx.needs_verification
    assert not machine.ctx.verify_phone


# -- login --------------------------------------------------------------------------------


def test_an_unverified_phone_is_asked_for_a_code_after_the_password() -> None:
    machine = LoginMachine(env(**SMS))
    unverified = phone_user(phone_number_verified_at=None)
    steps = drive(
        machine,
        LoginRequested(phone_number=PHONE, password=STRONG),
        UserLoaded(user=unverified),  # type: ignore[arg-type]
        PasswordVerified(ok=True),
    )
    assert steps[1] == [VerifyPasswordHash(password=STRONG, password_hash="$argon2id$stored")]
    assert steps[2] == [
        DecideSecondFactor(
            user=unverified,  # type: ignore[arg-type]
            login_method="basic_auth",
            channel=SignupMethod.MOBILE_BASIC_AUTH,
        )
    ]
    policy = MfaPolicy(enable_phone_verification=True, sms_enabled=True)
    assert policy.second_factor(unverified, SignupMethod.MOBILE_BASIC_AUTH) is Method.SMS_OTP  # type: ignore[arg-type]
    # whatever answers, an unverified number never gets tokens without the code
    assert last(machine, SecondFactorNotRequired()) == [
        Fail(error=Unauthenticated, message="invalid credentials")
    ]


def test_an_unverified_phone_without_phone_verification_is_refused() -> None:
    machine = LoginMachine(env(sms_enabled=True))
    effects = last(
        machine,
        LoginRequested(phone_number=PHONE, password=STRONG),
        UserLoaded(user=phone_user(phone_number_verified_at=None)),  # type: ignore[arg-type]
        PasswordVerified(ok=True),
    )
    assert effects == [Fail(error=Unauthenticated, message="invalid credentials")]
    assert machine.state is LoginState.FAILED


def test_a_wrong_password_on_an_unverified_phone_sends_nothing() -> None:
    machine = LoginMachine(env(**SMS))
    effects = last(
        machine,
        LoginRequested(phone_number=PHONE, password=STRONG),
        UserLoaded(user=phone_user(phone_number_verified_at=None)),  # type: ignore[arg-type]
        PasswordVerified(ok=False),
    )
    assert [type(e) for e in effects] == [AuditRecord, Fail]


# -- forgot_password by phone ---------------------------------------------------------------


def test_forgot_password_by_phone_parks_for_the_sms_code() -> None:
    machine, account = PasswordResetMachine(env(**SMS)), phone_user()
    steps = drive(
        machine, ForgotPasswordRequested(phone_number=f" {PHONE} "), UserLoaded(user=account)
    )  # type: ignore[arg-type]
    assert steps == [
        [LoadUser(phone_number=PHONE)],
        [
            AuditRecord(
                action=AuditAction.FORGOT_PASSWORD_REQUESTED,
                actor_id="user-1",
                resource_id="user-1",
                metadata={"channel": "sms"},
            ),
            StartChallenge(
                request=ChallengeRequested(
                    user=account,  # type: ignore[arg-type]
                    method=Method.SMS_OTP,
                    purpose=Purpose.PASSWORD_RESET,
                    channel=SignupMethod.MOBILE_BASIC_AUTH,
                )
            ),
        ],
    ]
    assert machine.state is ResetState.SMS_CODE_REQUIRED


@pytest.mark.parametrize(
    "account", [None, phone_user(revoked_timestamp=NOW - 1)], ids=["unknown", "revoked"]
)
def test_forgot_password_by_phone_answers_alike_and_sends_nothing(account: object) -> None:
    machine = PasswordResetMachine(env(**SMS))
    effects = last(machine, ForgotPasswordRequested(phone_number=PHONE), UserLoaded(user=account))  # type: ignore[arg-type]
    assert effects == [SetMfaCookie(value="id-1", max_age=otp.OTP_TTL), Respond(result=CODE_SENT)]


@pytest.mark.parametrize(
    ("policy", "phone", "fail"),
    [
        (
            {**SMS, "enable_mobile_basic_authentication": False},
            PHONE,
            Fail(
                error=FailedPrecondition,
                message="mobile basic authentication is disabled for this instance",
            ),
        ),
        ({}, PHONE, Fail(error=FailedPrecondition, message="SMS service not enabled")),
        (SMS, "12", Fail(error=InvalidArgument, message="invalid phone number")),
    ],
    ids=["mobile-off", "no-sms", "bad-number"],
)
def test_forgot_password_by_phone_checks(policy: dict[str, bool], phone: str, fail: Fail) -> None:
    assert last(
        PasswordResetMachine(env(**policy)), ForgotPasswordRequested(phone_number=phone)
    ) == [fail]


# -- reset_password by SMS code -----------------------------------------------------------

BY_CODE = ResetPasswordRequested(
    challenge_id="ch-1",
    otp=SMS_CODE,
    phone_number=PHONE,
    password=STRONG,
    confirm_password=STRONG,
)


def test_reset_by_code_checks_the_challenge_then_the_code_then_takes_it() -> None:
    machine, account = PasswordResetMachine(env(**SMS)), phone_user()
    steps = drive(
        machine,
        BY_CODE,
        ChallengeLoaded(challenge=reset_challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        ChallengeTaken(ok=True),
        UserLoaded(user=account),  # type: ignore[arg-type]
        PasswordHashed(password_hash="$argon2id$new"),
    )
    assert steps[:6] == [
        [LoadChallenge(challenge_id="ch-1")],
        [CountAttempt(challenge_id="ch-1", ttl=otp.OTP_TTL - 60)],
        [CheckCode(challenge_id="ch-1", code=SMS_CODE, digest="d" * 64)],
        [TakeChallenge(challenge_id="ch-1")],
        [LoadUser(user_id="user-1")],
        [HashPassword(password=STRONG)],
    ]
    updated = dataclasses.replace(
        account,  # type: ignore[type-var]
        password_hash="$argon2id$new",
        is_multi_factor_auth_enabled=True,
        updated_at=NOW,
    )
    assert steps[6] == [
        UpdateUser(user=updated),  # type: ignore[arg-type]
        ClearMfaCookie(),
        AuditRecord(action=AuditAction.PASSWORD_RESET, actor_id="user-1", resource_id="user-1"),
        DeleteUserSessions(user_id="user-1", end_links=True),
        Respond(result=MessageResponse(message="Password updated successfully.")),
    ]
    assert not machine.holds_secret


def test_reset_by_code_proves_the_phone_and_adds_mobile_basic_auth() -> None:
    machine = PasswordResetMachine(env(**SMS, enforce_mfa=False))
    account = user(phone_number=PHONE, phone_number_verified_at=None)
    effects = last(
        machine,
        BY_CODE,
        ChallengeLoaded(challenge=reset_challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        ChallengeTaken(ok=True),
        UserLoaded(user=account),
        PasswordHashed(password_hash="$argon2id$new"),
    )
    update = effects[0]
    assert isinstance(update, UpdateUser)
    assert update.user.phone_number_verified_at == NOW
    assert update.user.signup_methods == ("basic_auth", "mobile_basic_auth")
    assert update.user.is_multi_factor_auth_enabled is None


@pytest.mark.parametrize(
    "loaded",
    [
        None,
        reset_challenge(expires_at=NOW),
        reset_challenge(purpose=Purpose.LOGIN),
        reset_challenge(phone_number="+15550000000"),
    ],
    ids=["none", "expired", "login-code", "other-number"],
)
def test_reset_by_code_checks_the_challenge_before_any_code(loaded: object) -> None:
    machine = PasswordResetMachine(env(**SMS))
    effects = last(machine, BY_CODE, ChallengeLoaded(challenge=loaded))  # type: ignore[arg-type]
    assert effects == [INVALID_SESSION]  # no attempt counted, nothing compared or consumed
    assert not machine.holds_secret


def test_a_wrong_code_counts_and_the_last_attempt_drops_the_challenge() -> None:
    start = (BY_CODE, ChallengeLoaded(challenge=reset_challenge()))
    wrong = last(
        PasswordResetMachine(env(**SMS)), *start, AttemptCounted(attempts=1), CodeChecked(ok=False)
    )
    assert wrong == [INVALID_OTP]
    final = last(
        PasswordResetMachine(env(**SMS)),
        *start,
        AttemptCounted(attempts=otp.MAX_ATTEMPTS),
        CodeChecked(ok=False),
    )
    assert final == [DropChallenge(challenge_id="ch-1"), INVALID_OTP]
    machine = PasswordResetMachine(env(**SMS))
    past = last(machine, *start, AttemptCounted(attempts=otp.MAX_ATTEMPTS + 1))
    assert past == [DropChallenge(challenge_id="ch-1"), INVALID_SESSION]
    assert not machine.holds_secret


def test_a_right_code_with_a_bad_password_is_not_spent() -> None:
    mismatch = dataclasses.replace(BY_CODE, confirm_password="other")
    effects = last(
        PasswordResetMachine(env(**SMS)),
        mismatch,
        ChallengeLoaded(challenge=reset_challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
    )
    assert effects == [Fail(error=InvalidArgument, message="passwords don't match")]


def test_of_two_concurrent_resets_the_loser_of_the_take_fails_and_a_gone_user_is_not_found() -> (
    None
):
    start = (
        BY_CODE,
        ChallengeLoaded(challenge=reset_challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
    )
    assert last(PasswordResetMachine(env(**SMS)), *start, ChallengeTaken(ok=False)) == [
        INVALID_SESSION
    ]
    gone = last(
        PasswordResetMachine(env(**SMS)), *start, ChallengeTaken(ok=True), UserLoaded(user=None)
    )
    assert gone == [Fail(error=NotFound, message="user not found")]


@pytest.mark.parametrize(
    ("policy", "request_", "fail"),
    [
        (
            SMS,
            dataclasses.replace(BY_CODE, phone_number=" "),
            Fail(error=InvalidArgument, message="phone number is required"),
        ),
        ({}, BY_CODE, Fail(error=FailedPrecondition, message="SMS service not enabled")),
        (
            {**SMS, "enable_mobile_basic_authentication": False},
            BY_CODE,
            Fail(
                error=FailedPrecondition,
                message="mobile basic authentication is disabled for this instance",
            ),
        ),
        (SMS, dataclasses.replace(BY_CODE, challenge_id=None), INVALID_SESSION),
    ],
    ids=["no-phone", "no-sms", "mobile-off", "no-cookie"],
)
def test_reset_by_code_checks(
    policy: dict[str, bool], request_: ResetPasswordRequested, fail: Fail
) -> None:
    assert last(PasswordResetMachine(env(**policy)), request_) == [fail]


def test_the_code_never_survives_parking() -> None:
    machine = PasswordResetMachine(env(**SMS))
    machine.handle(BY_CODE)
    assert machine.holds_secret
    assert SMS_CODE not in repr(machine.to_dict())
    restored = PasswordResetMachine.from_dict(machine.to_dict(), env(**SMS))
    assert not restored.holds_secret
    with pytest.raises(Exception, match="code does not survive"):
        restored.handle(ChallengeLoaded(challenge=reset_challenge()))
    assert restored.state is ResetState.ERROR
