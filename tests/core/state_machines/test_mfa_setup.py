"""The MFA enrolment flow: each operation's path with its exact effects, and what refuses it
(no parked login, a foreign identifier, enforcement, a set-up factor, a code fallback)."""

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
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    CodeChecked,
    CodeGenerated,
    LoadAuthenticator,
    LoadChallenge,
    TakeChallenge,
)
from bastion.core.state_machines.mfa_setup import (
    MfaSetupMachine,
    MfaSetupRequested,
    SetupKind,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, env, tokens
from tests.core.state_machines.mfa_samples import (
    CHALLENGE_ID,
    CODE,
    account,
    authenticator,
    challenge,
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
        UserLoaded(user=account()),
        ChallengeTaken(ok=True),
    )
    assert steps[0] == [LoadChallenge(challenge_id=CHALLENGE_ID)]
    assert steps[1] == [LoadUser(user_id="user-1")]
    assert steps[2] == [TakeChallenge(challenge_id=CHALLENGE_ID)]
    [handoff] = steps[3]
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
        UserLoaded(user=account()),
        AuthenticatorLoaded(authenticator=None),
        ChallengeTaken(ok=True),
        TokensIssued(tokens=tokens()),
    )
    assert steps[2] == [LoadAuthenticator(user_id="user-1")]
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
        UserLoaded(user=account()),
        AuthenticatorLoaded(authenticator=authenticator()),
    )
    assert failure(effects).error is FailedPrecondition


def test_lock_records_the_lock_only_without_a_code_fallback() -> None:
    refused = up_to_user(MfaSetupMachine(env()), SetupKind.LOCK)
    assert failure(refused).error is FailedPrecondition
    machine = MfaSetupMachine(env())
    steps = drive(
        machine,
        request(SetupKind.LOCK, NO_CODES),
        ChallengeLoaded(challenge=totp_challenge()),
        UserLoaded(user=account()),
        ChallengeTaken(ok=True),
    )
    done = steps[3]
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
