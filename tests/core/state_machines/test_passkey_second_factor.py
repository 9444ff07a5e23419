"""A passkey as a second factor the login decides on (issue 22): a login parks for the
user's passkey rather than enrolling an authenticator app (or letting enforced MFA lapse),
every parked answer offers the passkey (``should_offer_webauthn_mfa_verify``), and a
passkey challenge takes no code."""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import Method, MfaPolicy
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.user import SignupMethod
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines.effects import AuditRecord, Fail, Respond
from bastion.core.state_machines.events import PasswordVerified, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import LoginMachine, LoginRequested, SecondFactorRequired
from bastion.core.state_machines.mfa import (
    NO_CODE_TO_RESEND,
    MfaMachine,
    ResendOtpRequested,
    State,
    VerifyOtpRequested,
)
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorLoaded,
    ChallengeLoaded,
    CodeGenerated,
    EnrolAuthenticator,
    MfaOutcome,
    RecordMfaOutcome,
    SetMfaCookie,
    StoreChallenge,
)
from bastion.core.state_machines.mfa_issue import PASSKEY_SCREEN
from tests.core.state_machines.drive import last
from tests.core.state_machines.harness import EMAIL, NOW, STRONG, env, user
from tests.core.state_machines.mfa_samples import (
    CHALLENGE_ID,
    account,
    authenticator,
    passkey_challenge,
)

BY_EMAIL = SignupMethod.BASIC_AUTH
#: MFA enforced, passkeys on, and every code method available.
ENFORCED = MfaPolicy(
    enable_mfa=True,
    enforce_mfa=True,
    enable_email_otp=True,
    enable_sms_otp=True,
    enable_totp_login=True,
    email_enabled=True,
    sms_enabled=True,
    enable_webauthn=True,
)


def _policy(**kw: Any) -> MfaPolicy:
    fields = {name: getattr(ENFORCED, name) for name in ENFORCED.__dataclass_fields__}
    return MfaPolicy(**{**fields, **kw})


def test_a_factor_set_up_comes_first_and_the_passkey_is_offered_beside_it() -> None:
    person = account(enrolled_mfa_methods=("totp",))
    assert ENFORCED.second_factor(person, BY_EMAIL, has_passkey=True) is Method.TOTP
    assert ENFORCED.passkey_usable(True)
    both = account(enrolled_mfa_methods=("webauthn", "totp"))
    assert ENFORCED.second_factor(both, BY_EMAIL, has_passkey=True) is Method.WEBAUTHN
    # A recorded "webauthn" whose passkeys were all deleted is skipped.
    assert ENFORCED.second_factor(both, BY_EMAIL, has_passkey=False) is Method.TOTP
    # A code needs no enrolment: it is still sent, the passkey offered beside it.
    assert ENFORCED.second_factor(account(), BY_EMAIL, has_passkey=True) is Method.EMAIL_OTP


@pytest.mark.parametrize(
    ("policy", "person", "expected"),
    [
        # passkeys off: the passkey is no factor at all
        (_policy(enable_webauthn=False), account(), Method.EMAIL_OTP),
        # MFA off for the server, or neither on for the user nor enforced: no factor
        (_policy(enable_mfa=False), account(), None),
        (_policy(enforce_mfa=False), account(is_multi_factor_auth_enabled=False), None),
        # MFA enforced and no code method usable at all: the passkey, not a login without
        # a second factor
        (
            _policy(enable_email_otp=False, enable_sms_otp=False, enable_totp_login=False),
            account(is_multi_factor_auth_enabled=None),
            Method.WEBAUTHN,
        ),
    ],
)
def test_when_the_passkey_is_the_factor(
    policy: MfaPolicy, person: Any, expected: Method | None
) -> None:
    assert policy.second_factor(person, BY_EMAIL, has_passkey=True) is expected
    # The driver asks the store for passkeys only where MFA applies to the user.
    assert policy.applies_to(person) is (expected is not None)
    assert not _policy(enable_webauthn=False).passkey_usable(True)
    if expected is Method.WEBAUTHN:  # without the passkey: no second factor at all
        assert policy.second_factor(person, BY_EMAIL) is None


def _parked_for_the_passkey(effects: list[Any], machine: MfaMachine) -> dict[str, Any]:
    """The stored challenge is the passkey's, without a code; the answer offers it."""
    assert machine.state is State.DONE
    stored = next(e for e in effects if isinstance(e, StoreChallenge)).challenge
    assert (stored.method, stored.code_digest, stored.user_id) == (Method.WEBAUTHN, None, "user-1")
    cookie = next(e for e in effects if isinstance(e, SetMfaCookie))
    assert (cookie.value, cookie.max_age) == (stored.id, stored.ttl)
    issued = next(e for e in effects if isinstance(e, AuditRecord))
    assert issued.metadata == {"method": "webauthn", "purpose": "login"}
    assert (
        RecordMfaOutcome(user_id="user-1", method=Method.WEBAUTHN, outcome=MfaOutcome.ISSUED)
        in effects
    )
    response = effects[-1]
    assert isinstance(response, Respond)
    assert isinstance(response.result, AuthResponse)
    body = response.result.to_api_dict()
    assert body["message"] == PASSKEY_SCREEN
    assert body["should_offer_webauthn_mfa_verify"] is True
    assert not any(body[k] for k in body if k.startswith("should_show"))
    assert body["access_token"] is None
    return body


def test_an_authenticator_app_is_not_enrolled_for_a_user_with_a_passkey() -> None:
    # Enforced MFA would show a new QR code; with a passkey the login parks for it.
    request = ChallengeRequested(user=account(), method=Method.TOTP, passkey=True)
    for found in (None, authenticator(verified=False, recovery_digests=())):
        machine = MfaMachine(env())
        effects = last(machine, request, AuthenticatorLoaded(authenticator=found))
        assert not any(isinstance(e, EnrolAuthenticator) for e in effects)
        _parked_for_the_passkey(effects, machine)
    # Set up already: the app's code is asked for, the passkey offered beside it.
    machine = MfaMachine(env())
    effects = last(machine, request, AuthenticatorLoaded(authenticator=authenticator()))
    response = effects[-1]
    assert isinstance(response, Respond)
    body = response.result.to_api_dict()
    assert (body["should_show_totp_screen"], body["should_offer_webauthn_mfa_verify"]) == (
        True,
        True,
    )
    # Without a passkey, the first login still enrols the app.
    plain = MfaMachine(env())
    enrol = last(
        plain,
        ChallengeRequested(user=account(), method=Method.TOTP),
        AuthenticatorLoaded(authenticator=None),
    )
    assert enrol == [EnrolAuthenticator(user_id="user-1")]


def test_a_skipped_unenforced_offer_is_no_mfa_even_with_a_passkey() -> None:
    skipped = account(has_skipped_mfa_setup_at=NOW - 60)
    unenforced = _policy(enforce_mfa=False)
    assert not unenforced.applies_to(skipped)
    assert unenforced.second_factor(skipped, BY_EMAIL, has_passkey=True) is None
    assert ENFORCED.applies_to(skipped)


def test_the_login_hands_the_passkey_offer_to_the_mfa_flow() -> None:
    machine = LoginMachine(env())
    effects = last(
        machine,
        LoginRequested(email=EMAIL, password=STRONG),
        UserLoaded(user=user()),
        PasswordVerified(ok=True),
        SecondFactorRequired(method=Method.WEBAUTHN, passkey=True),
    )
    request = ChallengeRequested(
        user=user(), method=Method.WEBAUTHN, roles=("user",), scope=DEFAULT_SCOPE, passkey=True
    )
    assert effects == [StartChallenge(request=request)]


def test_a_passkey_challenge_is_only_for_a_login_by_a_user_with_one() -> None:
    with pytest.raises(ValueError, match="passkey"):
        ChallengeRequested(user=account(), method=Method.WEBAUTHN)
    with pytest.raises(ValueError, match="passkey"):
        ChallengeRequested(user=account(), method=Method.WEBAUTHN, passkey=True, setup=True)


def test_the_passkey_challenge_is_stored_without_a_code_and_offers_the_passkey() -> None:
    machine = MfaMachine(env())
    request = ChallengeRequested(user=account(), method=Method.WEBAUTHN, passkey=True)
    _parked_for_the_passkey(machine.handle(request), machine)


def test_a_code_challenge_offers_the_passkey_beside_it() -> None:
    machine = MfaMachine(env())
    request = ChallengeRequested(user=account(), method=Method.EMAIL_OTP, passkey=True)
    effects = last(machine, request, CodeGenerated(code="123456", digest="d" * 64))
    response = effects[-1]
    assert isinstance(response, Respond)
    body = response.result.to_api_dict()
    assert body["should_show_email_otp_screen"] is True
    assert body["should_offer_webauthn_mfa_verify"] is True
    plain = MfaMachine(env())
    without = ChallengeRequested(user=account(), method=Method.EMAIL_OTP)
    done = last(plain, without, CodeGenerated(code="123456", digest="d" * 64))[-1]
    assert isinstance(done, Respond)
    assert done.result.to_api_dict()["should_offer_webauthn_mfa_verify"] is False


@pytest.mark.parametrize("is_totp", [False, True])
def test_no_code_answers_a_passkey_challenge(is_totp: bool) -> None:
    machine = MfaMachine(env())
    effects = last(
        machine,
        VerifyOtpRequested(challenge_id=CHALLENGE_ID, code="123456", is_totp=is_totp, email=EMAIL),
        ChallengeLoaded(challenge=passkey_challenge(expires_at=NOW + 60)),
        AttemptCounted(attempts=1),
    )
    assert effects[-1] == Fail(error=InvalidArgument, message="invalid otp")
    assert (
        RecordMfaOutcome(user_id="user-1", method=Method.WEBAUTHN, outcome=MfaOutcome.FAILED)
        in effects
    )


def test_a_passkey_challenge_has_nothing_to_resend() -> None:
    machine = MfaMachine(env())
    effects = last(
        machine,
        ResendOtpRequested(challenge_id=CHALLENGE_ID, email=EMAIL),
        ChallengeLoaded(challenge=passkey_challenge(issued_at=NOW - 100, expires_at=NOW + 60)),
    )
    assert effects == [Fail(error=FailedPrecondition, message=NO_CODE_TO_RESEND)]
