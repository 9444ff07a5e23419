"""The MFA flow: each method's documented path with its exact effects, and the rules that
protect a challenge (challenge first, one message per wrong code, attempts, replay)."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from bastion.core.auth import otp, totp
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.mfa import Challenge, EnrolmentResponse, Method, Purpose
from bastion.core.auth.responses import AuthResponse, ForgotPasswordResponse, MessageResponse
from bastion.core.auth.user import SignupMethod
from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, LocalFlowError, to_dot
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    DeleteSession,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import PasswordVerified, TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import StartChallenge
from bastion.core.state_machines.login import (
    LoginMachine,
    LoginRequested,
    SecondFactorRequired,
    challenge_after_login,
)
from bastion.core.state_machines.login import State as LoginState
from bastion.core.state_machines.mfa import (
    ChallengeRequested,
    MfaMachine,
    ResendOtpRequested,
    State,
    VerifyOtpRequested,
)
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CodeGenerated,
    CountAttempt,
    DropChallenge,
    EnrolAuthenticator,
    GenerateCode,
    LoadAuthenticator,
    LoadChallenge,
    MfaOutcome,
    RecordMfaOutcome,
    RecordTotpStep,
    SendSms,
    SetMfaCookie,
    StoreChallenge,
    TakeChallenge,
    UseRecoveryCode,
)
from bastion.core.state_machines.mfa_issue import sms_text
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, PHONE, env, tokens
from tests.core.state_machines.mfa_samples import (
    CHALLENGE_ID,
    CODE,
    CURRENT_STEP,
    DIGEST,
    ENROL_CODES,
    RECOVERY,
    RECOVERY_DIGEST,
    SECRET,
    TOTP_NOW,
    account,
    authenticator,
    challenge,
    sms_challenge,
    totp_challenge,
)

WRONG = Fail(error=InvalidArgument, message="invalid otp")
NO_SESSION = Fail(error=Unauthenticated, message="invalid session")
SCOPE = ("openid", "email", "profile")


def issued(c: Challenge) -> list[Effect]:
    return [
        SetMfaCookie(value=c.id, max_age=c.ttl),
        AuditRecord(
            action=AuditAction.MFA_CHALLENGE_ISSUED,
            actor_id="user-1",
            resource_id="user-1",
            metadata={"method": c.method.value, "purpose": c.purpose.value},
        ),
        RecordMfaOutcome(user_id="user-1", method=c.method, outcome=MfaOutcome.ISSUED),
    ]


def new_challenge(**overrides: object) -> Challenge:
    base: dict[str, object] = {
        "id": "id-1",
        "issued_at": NOW,
        "expires_at": NOW + otp.OTP_TTL,
        "roles": ("user",),
        "scope": SCOPE,
    }
    return challenge(**{**base, **overrides})


# -- issue -------------------------------------------------------------------------------


def test_email_code_challenge() -> None:
    machine, user = MfaMachine(env()), account()
    steps = drive(
        machine,
        ChallengeRequested(user=user, method=Method.EMAIL_OTP, roles=("user",), scope=SCOPE),
        CodeGenerated(code=CODE, digest=DIGEST),
    )
    stored = new_challenge()
    assert steps == [
        [GenerateCode(challenge_id="id-1")],
        [
            StoreChallenge(challenge=stored),
            SendEmail(event=EmailEvent.VERIFY_OTP, to=EMAIL, user=user, otp=CODE),
            *issued(stored),
            Respond(
                result=AuthResponse(
                    message="Please check email inbox for the OTP",
                    should_show_email_otp_screen=True,
                )
            ),
        ],
    ]
    assert machine.state is State.DONE
    assert stored.ttl == otp.OTP_TTL  # the cookie lives exactly as long as the challenge


@pytest.mark.parametrize(
    ("purpose", "ttl", "result"),
    [
        (
            Purpose.LOGIN,
            otp.OTP_TTL,
            AuthResponse(
                message="Please check text message for the OTP", should_show_mobile_otp_screen=True
            ),
        ),
        (
            Purpose.SIGNUP,
            otp.PHONE_VERIFICATION_TTL,
            AuthResponse(
                message="Please check the OTP in your inbox", should_show_mobile_otp_screen=True
            ),
        ),
        (
            Purpose.PASSWORD_RESET,
            otp.OTP_TTL,
            ForgotPasswordResponse(
                message="Please enter the OTP sent to your phone number and change your password.",
                should_show_mobile_otp_screen=True,
            ),
        ),
    ],
)
def test_sms_code_challenges(
    purpose: Purpose, ttl: int, result: AuthResponse | ForgotPasswordResponse
) -> None:
    user = account(phone_number_verified_at=None if purpose is Purpose.SIGNUP else NOW - 1)
    effects = last(
        MfaMachine(env()),
        ChallengeRequested(
            user=user,
            method=Method.SMS_OTP,
            purpose=purpose,
            channel=SignupMethod.MOBILE_BASIC_AUTH,
            scope=SCOPE,
        ),
        CodeGenerated(code=CODE, digest=DIGEST),
    )
    stored = sms_challenge(
        id="id-1", purpose=purpose, roles=(), scope=SCOPE, issued_at=NOW, expires_at=NOW + ttl
    )
    assert effects == [
        StoreChallenge(challenge=stored),
        SendSms(to=PHONE, body=f"Your verification code is: {CODE}"),
        *issued(stored),
        Respond(result=result),
    ]
    assert CODE not in repr(effects)


def test_authenticator_challenge_for_an_enrolled_user() -> None:
    machine = MfaMachine(env())
    steps = drive(
        machine,
        ChallengeRequested(user=account(), method=Method.TOTP, scope=SCOPE, roles=("user",)),
        AuthenticatorLoaded(authenticator=authenticator()),
    )
    stored = new_challenge(
        method=Method.TOTP, code_digest=None, expires_at=NOW + totp.TOTP_CHALLENGE_TTL
    )
    assert steps == [
        [LoadAuthenticator(user_id="user-1")],
        [
            StoreChallenge(challenge=stored),
            *issued(stored),
            Respond(
                result=AuthResponse(message="Proceed to totp screen", should_show_totp_screen=True)
            ),
        ],
    ]


@pytest.mark.parametrize("found", [None, authenticator(verified=False)])
def test_first_authenticator_enrolment_shows_qr_secret_and_recovery_codes(
    found: totp.Authenticator | None,
) -> None:
    machine = MfaMachine(env())
    steps = drive(
        machine,
        ChallengeRequested(user=account(), method=Method.TOTP, scope=SCOPE, roles=("user",)),
        AuthenticatorLoaded(authenticator=found),
        AuthenticatorEnrolled(secret=SECRET, recovery_codes=ENROL_CODES),
    )
    assert steps[1] == [EnrolAuthenticator(user_id="user-1")]
    *effects, respond = steps[2]
    stored = new_challenge(
        method=Method.TOTP,
        code_digest=None,
        expires_at=NOW + totp.TOTP_CHALLENGE_TTL,
        enrolling=True,
    )
    assert effects == [StoreChallenge(challenge=stored), *issued(stored)]
    assert isinstance(respond, Respond)
    response = respond.result
    assert isinstance(response, EnrolmentResponse)
    body = response.to_api_dict()
    assert body["message"] == "Proceed to totp verification screen"
    assert body["should_show_totp_screen"] is True
    assert body["access_token"] is None
    assert body["authenticator_secret"] == SECRET
    assert body["authenticator_recovery_codes"] == list(ENROL_CODES)
    image = body["authenticator_scanner_image"]
    assert not image.startswith("data:")
    assert base64.b64decode(image).startswith(b"\x89PNG\r\n\x1a\n")
    assert SECRET not in repr(response)
    assert ENROL_CODES[0] not in repr(response)


def test_challenge_requests_are_validated() -> None:
    with pytest.raises(ValueError, match="needs a user with an email"):
        ChallengeRequested(user=account(email=None), method=Method.EMAIL_OTP)
    with pytest.raises(ValueError, match="phone number"):
        ChallengeRequested(user=account(phone_number=None), method=Method.SMS_OTP)
    with pytest.raises(ValueError, match="goes by SMS code"):
        ChallengeRequested(user=account(), method=Method.EMAIL_OTP, purpose=Purpose.SIGNUP)


# -- verify ------------------------------------------------------------------------------


def verify(code: str = CODE, **kw: object) -> VerifyOtpRequested:
    base: dict[str, object] = {"challenge_id": CHALLENGE_ID, "code": code, "email": EMAIL}
    return VerifyOtpRequested(**{**base, **kw})  # type: ignore[arg-type]


def test_email_code_verification_completes_the_login() -> None:
    """The session is kept before the challenge is taken, and the commit (webhook, audit
    rows) comes last: a memory store failing before the take leaves the code usable."""
    machine, user, minted, c = MfaMachine(env()), account(), tokens(), challenge()
    steps = drive(
        machine,
        verify(),
        ChallengeLoaded(challenge=c),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=user),
        TokensIssued(tokens=minted),
        ChallengeTaken(ok=True),
    )
    assert steps == [
        [LoadChallenge(challenge_id=CHALLENGE_ID)],
        [CountAttempt(challenge_id=CHALLENGE_ID, ttl=c.expires_at - NOW, user_id="user-1")],
        [CheckCode(challenge_id=CHALLENGE_ID, code=CODE, digest=DIGEST)],
        [LoadUser(user_id="user-1")],
        [
            IssueTokens(
                user=user,
                roles=("user",),
                scope=SCOPE,
                login_method="basic_auth",
                nonce="id-1",
                include_refresh_token=False,
            )
        ],
        [
            PersistSession(
                user_id="user-1", login_method="basic_auth", tokens=minted, fresh_factor=True
            ),
            SetSessionCookie(value=minted.session_token),
            TakeChallenge(challenge_id=CHALLENGE_ID, user_id="user-1"),
        ],
        [
            ClearMfaCookie(),
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe="basic_auth"),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
                metadata={"mfa_method": "email_otp", "recovery_code": False},
            ),
            AuditRecord(
                action=AuditAction.MFA_PASSED,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
                metadata={"method": "email_otp", "recovery_code": False},
            ),
            RecordMfaOutcome(user_id="user-1", method=Method.EMAIL_OTP, outcome=MfaOutcome.PASSED),
            Respond(result=AuthResponse.with_tokens("OTP verified successfully.", user, minted)),
        ],
    ]
    assert machine.state is State.DONE
    assert not machine.holds_secret


def test_a_phone_signup_code_verifies_the_number_and_completes_the_signup() -> None:
    user = account(phone_number_verified_at=None)
    machine, minted = MfaMachine(env()), tokens(refresh=True)
    c = sms_challenge(purpose=Purpose.SIGNUP, scope=("openid", "offline_access"))
    steps = drive(
        machine,
        verify(email=None, phone_number=f" {PHONE} "),
        ChallengeLoaded(challenge=c),
        AttemptCounted(attempts=2),
        CodeChecked(ok=True),
        UserLoaded(user=user),
        TokensIssued(tokens=minted),
        ChallengeTaken(ok=True),
    )
    verified = dataclasses.replace(user, phone_number_verified_at=NOW, updated_at=NOW)
    assert steps[4] == [
        IssueTokens(
            user=verified,
            roles=("user",),
            scope=("openid", "offline_access"),
            login_method="mobile_otp",
            nonce="id-1",
            include_refresh_token=True,
        ),
    ]
    assert steps[5][:2] == [
        PersistSession(
            user_id="user-1", login_method="mobile_otp", tokens=minted, fresh_factor=True
        ),
        SetSessionCookie(value=minted.session_token),
    ]
    assert steps[6][:5] == [
        ClearMfaCookie(),
        UpdateUser(user=verified),
        EmitWebhook(event=WebhookEvent.SIGNUP, user=verified, auth_recipe="mobile_basic_auth"),
        AuditRecord(
            action=AuditAction.PHONE_VERIFIED,
            actor_id="user-1",
            actor_email=EMAIL,
            resource_id="user-1",
        ),
        EmitWebhook(event=WebhookEvent.LOGIN, user=verified, auth_recipe="mobile_basic_auth"),
    ]
    respond = steps[6][-1]
    assert isinstance(respond, Respond)
    assert respond.result == AuthResponse.with_tokens(
        "OTP verified successfully.", verified, minted
    )


def test_an_email_code_proves_an_unverified_email() -> None:
    user = account(email_verified_at=None)
    effects = last(
        MfaMachine(env()),
        verify(),
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=user),
        TokensIssued(tokens=tokens()),
        ChallengeTaken(ok=True),
    )
    assert effects[1] == UpdateUser(
        user=dataclasses.replace(user, email_verified_at=NOW, updated_at=NOW)
    )


def spends(effects: list[Effect]) -> list[Effect]:
    return [e for e in effects if isinstance(e, RecordTotpStep | UseRecoveryCode)]


def test_an_authenticator_code_is_spent_first_in_the_final_commit() -> None:
    """Checked against the loaded authenticator, spent (compare-and-set) only with the
    commit after the take (rule 8, issue 27): a store failing before leaves it unspent."""
    machine = MfaMachine(env())
    steps = drive(
        machine,
        verify(TOTP_NOW, is_totp=True),
        ChallengeLoaded(challenge=totp_challenge()),
        AttemptCounted(attempts=1),
        AuthenticatorLoaded(authenticator=authenticator()),
        UserLoaded(user=account()),
        TokensIssued(tokens=tokens()),
        ChallengeTaken(ok=True),
    )
    assert steps[2] == [LoadAuthenticator(user_id="user-1")]
    assert steps[3] == [LoadUser(user_id="user-1")]
    assert steps[5][-1] == TakeChallenge(challenge_id=CHALLENGE_ID, user_id="user-1")
    assert not spends([e for step in steps[:-1] for e in step])
    assert steps[6][:2] == [RecordTotpStep(user_id="user-1", step=CURRENT_STEP), ClearMfaCookie()]
    assert spends(steps[6]) == steps[6][:1]
    assert isinstance(steps[6][-1], Respond)


def test_the_first_code_of_an_enrolment_is_accepted_by_an_unverified_authenticator() -> None:
    effects = last(
        MfaMachine(env()),
        verify(TOTP_NOW, is_totp=True),
        ChallengeLoaded(challenge=totp_challenge(enrolling=True)),
        AttemptCounted(attempts=1),
        AuthenticatorLoaded(authenticator=authenticator(verified=False, last_used_step=None)),
        UserLoaded(user=account()),
        TokensIssued(tokens=tokens()),
        ChallengeTaken(ok=True),
    )
    assert effects[0] == RecordTotpStep(user_id="user-1", step=CURRENT_STEP)
    assert isinstance(effects[-1], Respond)


def test_a_recovery_code_is_used_once_and_audited() -> None:
    machine, user, minted = MfaMachine(env()), account(), tokens()
    steps = drive(
        machine,
        verify(RECOVERY.lower(), is_totp=True),
        ChallengeLoaded(challenge=totp_challenge()),
        AttemptCounted(attempts=1),
        AuthenticatorLoaded(authenticator=authenticator()),
        UserLoaded(user=user),
        TokensIssued(tokens=minted),
        ChallengeTaken(ok=True),
    )
    assert steps[3] == [LoadUser(user_id="user-1")]
    assert not spends([e for step in steps[:-1] for e in step])
    assert steps[-1][0] == UseRecoveryCode(user_id="user-1", digest=RECOVERY_DIGEST)
    assert spends(steps[-1]) == steps[-1][:1]
    assert (
        AuditRecord(
            action=AuditAction.LOGIN_SUCCESS,
            actor_id="user-1",
            actor_email=EMAIL,
            resource_id="user-1",
            metadata={"mfa_method": "totp", "recovery_code": True},
        )
        in steps[-1]
    )


@pytest.mark.parametrize("code", [TOTP_NOW, RECOVERY], ids=["authenticator", "recovery"])
def test_a_verify_that_loses_the_take_spends_no_code(code: str) -> None:
    """Of two verifies of one challenge, the loser drops its session and spends nothing:
    the code is the winner's to spend."""
    minted = tokens()
    effects = last(
        MfaMachine(env()),
        verify(code, is_totp=True),
        *TOTP_LOADED,
        AuthenticatorLoaded(authenticator=authenticator()),
        UserLoaded(user=account()),
        TokensIssued(tokens=minted),
        ChallengeTaken(ok=False),
    )
    assert effects == [
        DeleteSession(user_id="user-1", login_method="basic_auth", nonce=minted.nonce),
        NO_SESSION,
    ]


def test_a_recovery_code_in_flight_is_never_parked() -> None:
    """Its digest waits in the context for the final commit: it is not written out, and a
    parked copy (which could sign in without spending it) refuses to go on."""
    machine = MfaMachine(env())
    drive(
        machine,
        verify(RECOVERY, is_totp=True),
        *TOTP_LOADED,
        AuthenticatorLoaded(authenticator=authenticator()),
    )
    assert machine.state is State.LOADING_USER
    assert not machine.resumable
    parked = machine.to_dict()
    assert RECOVERY_DIGEST not in repr(parked)
    restored = MfaMachine.from_dict(parked, env())
    with pytest.raises(LocalFlowError, match="cannot go on"):
        restored.handle(UserLoaded(user=account()))


def failed_attempt(method: Method, attempt: int = 1) -> list[Effect]:
    return [
        AuditRecord(
            action=AuditAction.MFA_FAILED,
            actor_id="user-1",
            resource_id="user-1",
            metadata={"method": method.value, "attempt": attempt},
        ),
        RecordMfaOutcome(user_id="user-1", method=method, outcome=MfaOutcome.FAILED),
        WRONG,
    ]


TOTP_LOADED = (ChallengeLoaded(challenge=totp_challenge()), AttemptCounted(attempts=1))


@pytest.mark.parametrize(
    ("events", "method"),
    [
        pytest.param(
            (verify("000000"), ChallengeLoaded(challenge=challenge()), AttemptCounted(attempts=1),
             CodeChecked(ok=False)),
            Method.EMAIL_OTP,
            id="wrong-email-code",
        ),
        pytest.param(
            (verify("000000", is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=authenticator())),
            Method.TOTP,
            id="wrong-authenticator-code",
        ),
        pytest.param(
            (verify(TOTP_NOW, is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=authenticator(last_used_step=CURRENT_STEP))),
            Method.TOTP,
            id="replayed-authenticator-code",
        ),
        pytest.param(
            (verify(RECOVERY, is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=authenticator(recovery_digests=()))),
            Method.TOTP,
            id="unknown-recovery-code",
        ),
        pytest.param(
            (verify(RECOVERY, is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=authenticator(recovery_digests=("other",)))),
            Method.TOTP,
            id="recovery-code-used-before",
        ),
        pytest.param(
            (verify(RECOVERY, is_totp=True), ChallengeLoaded(challenge=totp_challenge(
                enrolling=True)), AttemptCounted(attempts=1),
             AuthenticatorLoaded(authenticator=authenticator(verified=False))),
            Method.TOTP,
            id="recovery-code-before-enrolment-completes",
        ),
        pytest.param(
            (verify(TOTP_NOW, is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=None)),
            Method.TOTP,
            id="no-authenticator",
        ),
        pytest.param(
            (verify(TOTP_NOW, is_totp=True), *TOTP_LOADED,
             AuthenticatorLoaded(authenticator=authenticator(verified=False))),
            Method.TOTP,
            id="authenticator-reset-since-the-challenge",
        ),
        pytest.param(
            (verify(CODE, is_totp=True), ChallengeLoaded(challenge=challenge()),
             AttemptCounted(attempts=1)),
            Method.EMAIL_OTP,
            id="totp-flag-on-an-email-challenge",
        ),
        pytest.param(
            (verify(TOTP_NOW), *TOTP_LOADED),
            Method.TOTP,
            id="email-flag-on-a-totp-challenge",
        ),
    ],
)  # fmt: skip
def test_every_wrong_code_gets_the_one_message(events: tuple[object, ...], method: Method) -> None:
    machine = MfaMachine(env())
    effects = last(machine, *events)  # type: ignore[arg-type]
    assert effects == failed_attempt(method)
    assert machine.state is State.FAILED
    assert not machine.holds_secret


def test_the_last_allowed_wrong_code_kills_the_challenge() -> None:
    effects = last(
        MfaMachine(env()),
        verify("000000"),
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS),
        CodeChecked(ok=False),
    )
    *audit, wrong = failed_attempt(Method.EMAIL_OTP, otp.MAX_ATTEMPTS)
    assert effects == [
        *audit,
        DropChallenge(challenge_id=CHALLENGE_ID),
        AuditRecord(
            action=AuditAction.MFA_GUESSES_EXHAUSTED,
            actor_id="user-1",
            resource_id="user-1",
            metadata={"method": "email_otp"},
        ),
        wrong,
    ]


def test_past_the_limit_no_code_is_even_compared() -> None:
    effects = last(
        MfaMachine(env()),
        verify(),  # the right code, too late
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS + 1),
    )
    assert effects == [DropChallenge(challenge_id=CHALLENGE_ID), NO_SESSION]


@pytest.mark.parametrize(
    "loaded",
    [
        None,
        challenge(expires_at=NOW),
        challenge(email="eve@example.com"),
        sms_challenge(purpose=Purpose.PASSWORD_RESET),
    ],
    ids=["none", "expired", "other-identifier", "password-reset-code"],
)
def test_the_challenge_is_checked_before_any_code(loaded: Challenge | None) -> None:
    machine = MfaMachine(env())
    steps = drive(machine, verify(phone_number=PHONE), ChallengeLoaded(challenge=loaded))
    assert steps[1] == [NO_SESSION]  # no attempt counted, no code compared or consumed
    assert not machine.holds_secret


def test_no_cookie_and_no_identifier() -> None:
    assert last(MfaMachine(env()), verify(challenge_id=None)) == [NO_SESSION]
    assert last(MfaMachine(env()), verify(email=" ")) == [
        Fail(error=InvalidArgument, message="email or phone number is required")
    ]


def test_of_two_concurrent_verifies_the_one_that_loses_the_take_fails() -> None:
    """... and drops the session it kept before the take."""
    machine = MfaMachine(env())
    effects = last(
        machine,
        verify(),
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=account()),
        TokensIssued(tokens=tokens(nonce="n-1")),
        ChallengeTaken(ok=False),
    )
    ended = DeleteSession(user_id="user-1", login_method="basic_auth", nonce="n-1")
    assert effects == [ended, NO_SESSION]
    assert machine.state is State.FAILED


@pytest.mark.parametrize(
    ("loaded_user", "error"),
    [(None, NotFound), (account(revoked_timestamp=NOW - 1), FailedPrecondition)],
)
def test_a_user_gone_or_revoked_meanwhile_gets_no_tokens(
    loaded_user: object, error: type[Exception]
) -> None:
    effects = last(
        MfaMachine(env()),
        verify(),
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=loaded_user),  # type: ignore[arg-type]
    )
    assert effects == [Fail(error=error, message="invalid verification request")]  # type: ignore[arg-type]


# -- resend ------------------------------------------------------------------------------


def test_resend_replaces_the_challenge_and_its_code() -> None:
    machine, user, old = MfaMachine(env()), account(), challenge(sends=2)
    steps = drive(
        machine,
        ResendOtpRequested(challenge_id=CHALLENGE_ID, email=EMAIL),
        ChallengeLoaded(challenge=old),
        ChallengeTaken(ok=True),
        UserLoaded(user=user),
        CodeGenerated(code=CODE, digest="e" * 64),
    )
    fresh = dataclasses.replace(
        old, id="id-1", code_digest="e" * 64, issued_at=NOW, expires_at=NOW + otp.OTP_TTL, sends=3
    )
    assert steps[:4] == [
        [LoadChallenge(challenge_id=CHALLENGE_ID)],
        [TakeChallenge(challenge_id=CHALLENGE_ID)],
        [LoadUser(user_id="user-1")],
        [GenerateCode(challenge_id="id-1")],
    ]
    assert steps[4] == [
        StoreChallenge(challenge=fresh),
        SendEmail(event=EmailEvent.VERIFY_OTP, to=EMAIL, user=user, otp=CODE),
        *issued(fresh),
        AuditRecord(action=AuditAction.OTP_RESENT, actor_id="user-1", resource_id="user-1"),
        Respond(result=MessageResponse(message="OTP has been sent. Please check your inbox")),
    ]


def test_resend_by_sms() -> None:
    effects = last(
        MfaMachine(env()),
        ResendOtpRequested(challenge_id=CHALLENGE_ID, phone_number=PHONE),
        ChallengeLoaded(challenge=sms_challenge(purpose=Purpose.PASSWORD_RESET)),
        ChallengeTaken(ok=True),
        UserLoaded(user=account()),
        CodeGenerated(code=CODE, digest=DIGEST),
    )
    assert SendSms(to=PHONE, body=sms_text(CODE)) in effects


@pytest.mark.parametrize(
    ("loaded", "fail"),
    [
        (None, NO_SESSION),
        (challenge(expires_at=NOW - 1), NO_SESSION),
        (challenge(email="eve@example.com"), NO_SESSION),
        (
            totp_challenge(),
            Fail(error=FailedPrecondition, message="an authenticator code cannot be resent"),
        ),
        (
            challenge(issued_at=NOW - otp.RESEND_INTERVAL + 1),
            Fail(error=ResourceExhausted, message="please wait before requesting another code"),
        ),
        (
            challenge(sends=otp.MAX_SENDS),
            Fail(error=ResourceExhausted, message="too many codes requested, please log in again"),
        ),
    ],
)
def test_resend_refusals(loaded: Challenge | None, fail: Fail) -> None:
    effects = last(
        MfaMachine(env()),
        ResendOtpRequested(challenge_id=CHALLENGE_ID, email=EMAIL),
        ChallengeLoaded(challenge=loaded),
    )
    assert effects == [fail]


def test_resend_loses_to_a_concurrent_take_or_a_revoked_user() -> None:
    start = (ResendOtpRequested(challenge_id=CHALLENGE_ID, email=EMAIL),)
    loaded = ChallengeLoaded(challenge=challenge())
    assert last(MfaMachine(env()), *start, loaded, ChallengeTaken(ok=False)) == [NO_SESSION]
    revoked = UserLoaded(user=account(revoked_timestamp=NOW - 1))
    assert last(MfaMachine(env()), *start, loaded, ChallengeTaken(ok=True), revoked) == [NO_SESSION]
    assert last(MfaMachine(env()), ResendOtpRequested(challenge_id=None, email=EMAIL)) == [
        NO_SESSION
    ]


def test_a_parked_login_hands_over_to_the_challenge() -> None:
    login = LoginMachine(env())
    (*_, effects) = drive(
        login,
        LoginRequested(phone_number=PHONE, password="Str0ng!pw", scope=("openid",), state="st"),
        UserLoaded(user=account()),
        PasswordVerified(ok=True),
        SecondFactorRequired(method=Method.SMS_OTP),
    )
    assert login.state is LoginState.SECOND_FACTOR_REQUIRED
    request = challenge_after_login(login.ctx, Method.SMS_OTP)
    assert effects[-1] == StartChallenge(request=request)
    assert request == ChallengeRequested(
        user=account(),
        method=Method.SMS_OTP,
        channel=SignupMethod.MOBILE_BASIC_AUTH,
        roles=("user",),
        scope=("openid",),
        state="st",
    )
    with pytest.raises(ValueError, match="not verified a password"):
        challenge_after_login(LoginMachine(env()).ctx, Method.TOTP)


def test_the_state_diagram_draws_every_edge() -> None:
    dot = to_dot(MfaMachine.TABLE, "mfa")
    edges = sum(len(entry.targets) for entry in MfaMachine.TABLE.values())
    assert dot.count(" -> ") == edges
    assert '"START" -> "LOADING_CHALLENGE" [label="VerifyOtpRequested"];' in dot


def test_identifiers_are_compared_normalised() -> None:
    stored = challenge(email="Ann@Example.COM")
    effects = last(
        MfaMachine(env()), verify(email=" ANN@example.com"), ChallengeLoaded(challenge=stored)
    )
    assert effects == [
        CountAttempt(challenge_id=CHALLENGE_ID, ttl=stored.expires_at - NOW, user_id="user-1")
    ]
