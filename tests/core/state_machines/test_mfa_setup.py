"""The MFA enrolment flow: each operation's path with its exact effects, and what refuses it
(no parked login, a foreign identifier, enforcement, a set-up factor, a code fallback, a
working second factor the password alone would replace: issue 36)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bastion.core.auth.mfa import Method, MfaPolicy, Purpose
from bastion.core.auth.responses import AuthResponse, MessageResponse
from bastion.core.auth.user import SignupMethod
from bastion.core.errors import FailedPrecondition, InvalidArgument, Unauthenticated
from bastion.core.state_machines._machine import Effect
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    Respond,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import MFA_LOCKED
from bastion.core.state_machines.mfa import MfaMachine, VerifyOtpRequested
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    CodeChecked,
    CodeGenerated,
    FactorsLoaded,
    LoadChallenge,
    LoadFactors,
    TakeChallenge,
)
from bastion.core.state_machines.mfa_setup import (
    FRESH_FACTOR_NEEDED,
    LOCK_HAS_FACTOR,
    SETUP_HAS_FACTOR,
    SKIP_ENROLLED,
    MfaSetupMachine,
    MfaSetupRequested,
    SetupKind,
    SignedIn,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, env, tokens
from tests.core.state_machines.mfa_samples import (
    CHALLENGE_ID,
    CODE,
    account,
    challenge,
    passkey_challenge,
    totp_challenge,
)

MFA = MfaPolicy(
    enable_mfa=True,
    enforce_mfa=False,
    enable_email_otp=True,
    enable_sms_otp=True,
    enable_totp_login=True,
    email_enabled=True,
    sms_enabled=True,
)
NO_CODES = MfaPolicy(enable_mfa=True, enforce_mfa=False, enable_totp_login=True)
PASSKEYS = MfaPolicy(**{**dataclasses.asdict(NO_CODES), "enable_webauthn": True})
NOTHING = FactorsLoaded(verified_authenticator=False, passkey=False)
#: a user who set nothing up: MFA offered, not switched on by the user
NEWCOMER = {"is_multi_factor_auth_enabled": None}


def request(kind: SetupKind, mfa: MfaPolicy = MFA, **overrides: Any) -> MfaSetupRequested:
    base: dict[str, Any] = {"kind": kind, "challenge_id": CHALLENGE_ID, "email": EMAIL, "mfa": mfa}
    return MfaSetupRequested(**{**base, **overrides})


def up_to_user(machine: MfaSetupMachine, kind: SetupKind, **kw: Any) -> list[Effect]:
    mfa = kw.pop("mfa", MFA)
    loaded = kw.pop("challenge", challenge())
    return last(
        machine,
        request(kind, mfa),
        ChallengeLoaded(challenge=loaded),
        UserLoaded(user=kw.pop("user", account())),
    )


def failure(effects: list[Effect]) -> Fail:
    assert len(effects) == 1
    assert isinstance(effects[0], Fail)
    return effects[0]


@pytest.mark.parametrize(
    ("kind", "method"),
    [
        (SetupKind.EMAIL_OTP, Method.EMAIL_OTP),
        (SetupKind.SMS_OTP, Method.SMS_OTP),
        (SetupKind.TOTP, Method.TOTP),
    ],
)
def test_a_setup_takes_the_parked_challenge_and_parks_for_its_own(
    kind: SetupKind, method: Method
) -> None:
    machine = MfaSetupMachine(env())
    steps = drive(
        machine,
        request(kind),
        ChallengeLoaded(challenge=challenge()),
        UserLoaded(user=account(**NEWCOMER)),
        NOTHING,
        ChallengeTaken(ok=True),
    )
    assert steps[0] == [LoadChallenge(challenge_id=CHALLENGE_ID)]
    assert steps[1] == [LoadUser(user_id="user-1")]
    assert steps[2] == [LoadFactors(user_id="user-1")]
    assert steps[3] == [TakeChallenge(challenge_id=CHALLENGE_ID)]
    [handoff] = steps[4]
    assert isinstance(handoff, StartChallenge)
    assert machine.state is State.CHALLENGE_REQUIRED
    issued = handoff.request
    assert (issued.user.id, issued.method, issued.channel.value) == ("user-1", method, "basic_auth")
    assert issued.setup


def test_passing_a_setup_challenge_enrols_its_method() -> None:
    machine = MfaMachine(env())
    setup = challenge(setup=True)
    steps = drive(
        machine,
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code=CODE, email=EMAIL),
        ChallengeLoaded(challenge=setup),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=account()),
        TokensIssued(tokens=tokens()),
        ChallengeTaken(ok=True),
    )
    assert isinstance(steps[4][-1], IssueTokens)
    done = steps[6]
    updates = [e for e in done if isinstance(e, UpdateUser)]
    assert [u.user.enrolled_mfa_methods for u in updates] == [("email_otp",)]
    assert (
        EmitWebhook(event=WebhookEvent.MFA_ENROLLED, user=updates[0].user, auth_recipe="email_otp")
        in done
    )
    assert any(isinstance(e, AuditRecord) and e.action is AuditAction.MFA_ENROLLED for e in done)


def test_a_plain_challenge_enrols_nothing() -> None:
    machine = MfaMachine(env())
    steps = drive(
        machine,
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code=CODE, email=EMAIL),
        ChallengeLoaded(challenge=challenge()),
        AttemptCounted(attempts=1),
        CodeChecked(ok=True),
        UserLoaded(user=account()),
        TokensIssued(tokens=tokens()),
        ChallengeTaken(ok=True),
    )
    assert not any(isinstance(e, UpdateUser) for step in steps for e in step)
    assert not any(
        isinstance(e, EmitWebhook) and e.event is WebhookEvent.MFA_ENROLLED for e in steps[6]
    )


def test_a_parked_login_offers_the_codes_it_could_set_up() -> None:
    machine = MfaMachine(env())
    offered = ChallengeRequested(
        user=account(), method=Method.EMAIL_OTP, offers=(Method.EMAIL_OTP, Method.SMS_OTP)
    )
    effects = last(machine, offered, CodeGenerated(code=CODE, digest="d" * 64))
    response = effects[-1]
    assert isinstance(response, Respond)
    assert isinstance(response.result, AuthResponse)
    body = response.result.to_api_dict()
    assert body["should_offer_email_otp_mfa_setup"] is True
    assert body["should_offer_sms_otp_mfa_setup"] is True
    assert body["access_token"] is None


def test_policy_offers_only_before_a_factor_is_set_up() -> None:
    assert MFA.setup_offers(account()) == (Method.EMAIL_OTP, Method.SMS_OTP)
    assert MFA.setup_offers(account(enrolled_mfa_methods=("totp",))) == ()
    assert MFA.setup_offers(account(phone_number=None)) == (Method.EMAIL_OTP,)


def test_skip_finishes_the_login_and_records_it() -> None:
    machine = MfaSetupMachine(env())
    steps = drive(
        machine,
        request(SetupKind.SKIP),
        ChallengeLoaded(challenge=challenge()),
        UserLoaded(user=account(**NEWCOMER)),
        NOTHING,
        ChallengeTaken(ok=True),
        TokensIssued(tokens=tokens()),
    )
    assert steps[2] == [LoadFactors(user_id="user-1")]
    update, issue = steps[4]
    assert isinstance(update, UpdateUser)
    assert update.user.has_skipped_mfa_setup_at == NOW
    assert isinstance(issue, IssueTokens)
    done = steps[5]
    assert ClearMfaCookie() in done
    events = [e.event for e in done if isinstance(e, EmitWebhook)]
    assert events == [WebhookEvent.MFA_SETUP_SKIPPED, WebhookEvent.LOGIN]
    respond = done[-1]
    assert isinstance(respond, Respond)
    assert isinstance(respond.result, AuthResponse)
    assert respond.result.access_token is not None
    # and the skip holds at later logins, until MFA is enforced
    skipped = update.user
    assert MFA.second_factor(skipped, _basic()) is None
    enforced = MfaPolicy(**{**_fields(MFA), "enforce_mfa": True})
    assert enforced.second_factor(skipped, _basic()) is Method.EMAIL_OTP


def _basic() -> SignupMethod:
    return SignupMethod.BASIC_AUTH


def _fields(policy: MfaPolicy) -> dict[str, Any]:
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy)}


def test_skip_is_refused_when_enforced_or_a_factor_is_set_up() -> None:
    enforced = MfaPolicy(**{**_fields(MFA), "enforce_mfa": True})
    error = failure(up_to_user(MfaSetupMachine(env()), SetupKind.SKIP, mfa=enforced))
    assert error.error is FailedPrecondition
    enrolled = account(enrolled_mfa_methods=("sms_otp",))
    error = failure(up_to_user(MfaSetupMachine(env()), SetupKind.SKIP, user=enrolled))
    assert error.error is FailedPrecondition
    machine = MfaSetupMachine(env())
    effects = last(
        machine,
        request(SetupKind.SKIP),
        ChallengeLoaded(challenge=challenge()),
        UserLoaded(user=account(**NEWCOMER)),
        FactorsLoaded(verified_authenticator=True, passkey=False),
    )
    assert failure(effects).error is FailedPrecondition


def test_lock_records_the_lock_only_without_a_code_fallback() -> None:
    refused = up_to_user(MfaSetupMachine(env()), SetupKind.LOCK)
    assert failure(refused).error is FailedPrecondition
    machine = MfaSetupMachine(env())
    steps = drive(
        machine,
        request(SetupKind.LOCK, NO_CODES),
        ChallengeLoaded(challenge=totp_challenge(enrolling=True)),
        UserLoaded(user=account()),
        NOTHING,
        ChallengeTaken(ok=True),
    )
    done = steps[4]
    assert isinstance(done[0], UpdateUser)
    assert done[0].user.mfa_locked_at == NOW
    assert ClearMfaCookie() in done
    assert [e.event for e in done if isinstance(e, EmitWebhook)] == [WebhookEvent.MFA_LOCKED]
    assert any(isinstance(e, AuditRecord) and e.action is AuditAction.MFA_LOCKED for e in done)
    assert done[-1] == Respond(result=MessageResponse(message=done[-1].result.message))
    assert machine.state is State.DONE
    locked = up_to_user(
        MfaSetupMachine(env()), SetupKind.EMAIL_OTP, user=account(mfa_locked_at=NOW)
    )
    assert failure(locked).message == MFA_LOCKED


@pytest.mark.parametrize(
    ("event", "loaded", "error"),
    [
        (request(SetupKind.EMAIL_OTP, challenge_id=None), None, Unauthenticated),
        (request(SetupKind.EMAIL_OTP, email=None), None, InvalidArgument),
        (request(SetupKind.EMAIL_OTP), challenge(email="other@example.com"), Unauthenticated),
        (request(SetupKind.EMAIL_OTP), challenge(expires_at=NOW), Unauthenticated),
        (
            request(SetupKind.EMAIL_OTP),
            challenge(purpose=Purpose.PASSWORD_RESET, method=Method.SMS_OTP),
            Unauthenticated,
        ),
    ],
)
def test_only_a_parked_login_of_the_named_identifier_is_continued(
    event: MfaSetupRequested, loaded: Any, error: type[Exception]
) -> None:
    machine = MfaSetupMachine(env())
    effects = machine.handle(event)
    if loaded is not None:
        effects = machine.handle(ChallengeLoaded(challenge=loaded))
    assert failure(effects).error is error
    assert machine.state is State.FAILED


def test_a_code_the_server_cannot_send_is_refused() -> None:
    error = failure(
        up_to_user(MfaSetupMachine(env()), SetupKind.SMS_OTP, user=account(phone_number=None))
    )
    assert error.error is FailedPrecondition
    error = failure(up_to_user(MfaSetupMachine(env()), SetupKind.EMAIL_OTP, mfa=NO_CODES))
    assert error.error is FailedPrecondition


# -- issue 36: a password alone never replaces, skips or locks a working second factor ---

VERIFIED = FactorsLoaded(verified_authenticator=True, passkey=False)
PASSKEY = FactorsLoaded(verified_authenticator=False, passkey=True)


@pytest.mark.parametrize(
    ("kind", "mfa", "user", "parked", "factors", "message"),
    [
        # item 2: the victim's factor is an emailed code (MFA on), an enrolled email_otp,
        # or a passkey; the attacker sets up its own authenticator
        (SetupKind.TOTP, MFA, account(), challenge(), NOTHING, SETUP_HAS_FACTOR),
        (
            SetupKind.TOTP,
            MFA,
            account(**NEWCOMER, enrolled_mfa_methods=("email_otp",)),
            challenge(),
            NOTHING,
            SETUP_HAS_FACTOR,
        ),
        (SetupKind.TOTP, PASSKEYS, account(), passkey_challenge(), PASSKEY, SETUP_HAS_FACTOR),
        # item 3: a verified authenticator swapped for a mailbox code
        (
            SetupKind.EMAIL_OTP,
            MFA,
            account(**NEWCOMER),
            totp_challenge(),
            VERIFIED,
            SETUP_HAS_FACTOR,
        ),
        (SetupKind.SMS_OTP, MFA, account(), challenge(), NOTHING, SETUP_HAS_FACTOR),
        # item 4: MFA on (an emailed code), a passkey: never skipped
        (SetupKind.SKIP, MFA, account(), challenge(), NOTHING, SKIP_ENROLLED),
        (SetupKind.SKIP, PASSKEYS, account(), passkey_challenge(), PASSKEY, SKIP_ENROLLED),
        # item 12: a passkey-only user, an authenticator user: never locked by a password
        (SetupKind.LOCK, PASSKEYS, account(), passkey_challenge(), PASSKEY, LOCK_HAS_FACTOR),
        (SetupKind.LOCK, NO_CODES, account(), totp_challenge(), VERIFIED, LOCK_HAS_FACTOR),
    ],
)
def test_a_working_factor_must_be_passed_not_replaced(
    kind: SetupKind,
    mfa: MfaPolicy,
    user: Any,
    parked: Any,
    factors: FactorsLoaded,
    message: str,
) -> None:
    machine = MfaSetupMachine(env())
    effects = last(
        machine,
        request(kind, mfa),
        ChallengeLoaded(challenge=parked),
        UserLoaded(user=user),
        factors,
    )
    refused = failure(effects)
    assert (refused.error, refused.message) == (FailedPrecondition, message)
    assert machine.state is State.FAILED


@pytest.mark.parametrize(
    ("kind", "mfa", "user", "parked", "factors"),
    [
        # the parked login's own code set up: its setup challenge is that code again
        (SetupKind.EMAIL_OTP, MFA, account(), challenge(), NOTHING),
        (SetupKind.TOTP, NO_CODES, account(), totp_challenge(), VERIFIED),
        # nothing set up yet: the first enrolment, a skip, a lock
        (SetupKind.TOTP, NO_CODES, account(), totp_challenge(enrolling=True), NOTHING),
        (SetupKind.SKIP, NO_CODES, account(), totp_challenge(enrolling=True), NOTHING),
        (SetupKind.LOCK, NO_CODES, account(), totp_challenge(enrolling=True), NOTHING),
        # a passkey or authenticator the server does not offer is no working factor
        (SetupKind.TOTP, NO_CODES, account(), totp_challenge(enrolling=True), PASSKEY),
    ],
)
def test_what_proves_no_less_than_the_parked_login_goes_ahead(
    kind: SetupKind, mfa: MfaPolicy, user: Any, parked: Any, factors: FactorsLoaded
) -> None:
    machine = MfaSetupMachine(env())
    effects = last(
        machine,
        request(kind, mfa),
        ChallengeLoaded(challenge=parked),
        UserLoaded(user=user),
        factors,
    )
    assert effects == [TakeChallenge(challenge_id=CHALLENGE_ID)]


def test_an_authenticator_being_enrolled_is_not_the_same_proof() -> None:
    """A login parked on a first enrolment while MFA asks an emailed code elsewhere."""
    machine = MfaSetupMachine(env())
    effects = last(
        machine,
        request(SetupKind.TOTP),
        ChallengeLoaded(challenge=totp_challenge(enrolling=True)),
        UserLoaded(user=account()),
        NOTHING,
    )
    assert failure(effects).message == SETUP_HAS_FACTOR


def signed_in_request(kind: SetupKind, *, fresh: bool, **overrides: Any) -> MfaSetupRequested:
    session = SignedIn(user_id="user-1", roles=("user",), fresh_factor=fresh)
    return request(kind, challenge_id=None, signed_in=session, **overrides)


def test_a_signed_in_session_fresh_from_its_factor_sets_up_another() -> None:
    machine = MfaSetupMachine(env())
    steps = drive(
        machine,
        signed_in_request(SetupKind.TOTP, fresh=True),
        UserLoaded(user=account()),
        FactorsLoaded(verified_authenticator=False, passkey=False),
    )
    assert steps[0] == [LoadUser(user_id="user-1")]
    [handoff] = steps[2]
    assert isinstance(handoff, StartChallenge)
    assert (handoff.request.method, handoff.request.setup) == (Method.TOTP, True)
    assert handoff.request.roles == ("user",)
    assert machine.state is State.CHALLENGE_REQUIRED


def test_a_signed_in_session_needs_a_fresh_factor_its_own_identifier_and_no_skip() -> None:
    stale = last(
        MfaSetupMachine(env()),
        signed_in_request(SetupKind.TOTP, fresh=False),
        UserLoaded(user=account()),
        NOTHING,
    )
    assert failure(stale).message == FRESH_FACTOR_NEEDED
    # nothing set up yet: a session is enough, as a parked login is
    newcomer = last(
        MfaSetupMachine(env()),
        signed_in_request(SetupKind.TOTP, fresh=False),
        UserLoaded(user=account(**NEWCOMER)),
        NOTHING,
    )
    assert isinstance(newcomer[0], StartChallenge)
    other = last(
        MfaSetupMachine(env()),
        signed_in_request(SetupKind.TOTP, fresh=True, email="someone@else.test"),
        UserLoaded(user=account()),
    )
    assert failure(other).error is Unauthenticated
    for kind in (SetupKind.SKIP, SetupKind.LOCK):
        refused = MfaSetupMachine(env()).handle(signed_in_request(kind, fresh=True))
        assert failure(refused).error is Unauthenticated


def test_an_enforced_emailed_code_is_a_working_factor_too() -> None:
    """Item 2 with ``--enforce-mfa``: a user whose MFA flag was never set is still asked an
    emailed code, which an authenticator set up by the password alone must not replace."""
    enforced = MfaPolicy(**{**dataclasses.asdict(MFA), "enforce_mfa": True})
    effects = last(
        MfaSetupMachine(env()),
        request(SetupKind.TOTP, enforced),
        ChallengeLoaded(challenge=challenge()),
        UserLoaded(user=account(**NEWCOMER)),
        NOTHING,
    )
    assert failure(effects).message == SETUP_HAS_FACTOR
