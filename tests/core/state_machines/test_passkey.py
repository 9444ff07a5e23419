"""The passkey flow (issue 22), pure: scripted ceremonies, every refusal, and an exhaustive
walk that must reach every edge of the table, with illegal pairs loud and terminal."""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from typing import Any

import pytest

from bastion.core.auth.mfa import Challenge, Method, Purpose
from bastion.core.auth.mfa_settings import FRESH_FACTOR_WINDOW
from bastion.core.auth.passkeys import (
    CEREMONY_TTL,
    Ceremony,
    CeremonyKind,
    PasskeyCredential,
    PasskeyOptions,
    client_challenge,
    counter_moved_back,
    credential_id_of,
)
from bastion.core.auth.responses import AuthResponse
from bastion.core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Event, Fail, LocalFlowError
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    EmitWebhook,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.mfa_effects import (
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    LoadChallenge,
    RecordMfaOutcome,
    TakeChallenge,
)
from bastion.core.state_machines.passkey import (
    INVALID_CHALLENGE,
    INVALID_PASSKEY,
    LOGIN_METHOD,
    PasskeyMachine,
    RegistrationVerifyRequested,
    SignInVerifyRequested,
    State,
)
from bastion.core.state_machines.passkey_effects import (
    AssertionVerified,
    AttestationVerified,
    CeremonyTaken,
    CredentialLoaded,
    CredentialsLoaded,
    CredentialStored,
    CredentialUseRecorded,
    LoadCredential,
    LoadCredentials,
    RecordCredentialUse,
    StoreCeremony,
    StoreCredential,
    TakeCeremony,
    VerifyAssertion,
    VerifyAttestation,
)
from bastion.core.state_machines.passkey_options import (
    NOT_FRESH,
    PasskeyOptionsMachine,
    RegistrationOptionsRequested,
    SignInOptionsRequested,
)
from tests.core.state_machines.harness import NOW, env, tokens, user

CRED = PasskeyCredential(
    id="pk-1",
    user_id="user-1",
    credential_id="Y3JlZA",
    public_key=b"cose",
    sign_count=4,
    name="Laptop",
    created_at=NOW - 50,
    updated_at=NOW - 50,
)


def ceremony(kind: CeremonyKind = CeremonyKind.PASSWORDLESS, **overrides: Any) -> Ceremony:
    base: dict[str, Any] = {
        "challenge": "chal",
        "kind": kind,
        "expires_at": NOW + 60,
        "user_verification": kind is CeremonyKind.PASSWORDLESS,
    }
    if kind is not CeremonyKind.PASSWORDLESS:
        base["user_id"] = "user-1"
    if kind is CeremonyKind.SECOND_FACTOR:
        base["mfa_challenge_id"] = "mfa-1"
    base.update(overrides)
    return Ceremony(**base)


def mfa_challenge(**overrides: Any) -> Challenge:
    base: dict[str, Any] = {
        "id": "mfa-1",
        "user_id": "user-1",
        "method": Method.TOTP,
        "purpose": Purpose.LOGIN,
        "email": "ann@example.com",
        "login_method": "basic_auth",
        "auth_recipe": "basic_auth",
        "roles": ("user",),
        "scope": ("openid",),
        "issued_at": NOW - 10,
        "expires_at": NOW + 200,
    }
    base.update(overrides)
    return Challenge(**base)


def verified(**overrides: Any) -> AssertionVerified:
    base: dict[str, Any] = {"ok": True, "sign_count": 5, "user_verified": True}
    base.update(overrides)
    return AssertionVerified(**base)


def fail_of(effects: list[Any]) -> Fail:
    assert isinstance(effects[-1], Fail), effects
    return effects[-1]


def sign_in(mfa: str | None = None) -> SignInVerifyRequested:
    return SignInVerifyRequested(
        challenge="chal", credential_id=CRED.credential_id, response="{}", mfa_challenge_id=mfa
    )


# -- options ------------------------------------------------------------------------------


def test_registration_options_exclude_the_users_passkeys() -> None:
    m = PasskeyOptionsMachine(env())
    effects = m.handle(
        RegistrationOptionsRequested(user_id="user-1", challenge="chal", proved_at=NOW - 10)
    )
    assert effects == [LoadUser(user_id="user-1")]
    assert m.handle(UserLoaded(user=user())) == [LoadCredentials(user_id="user-1")]
    store, respond = m.handle(CredentialsLoaded(credentials=(CRED,)))
    expected = Ceremony(
        challenge="chal",
        kind=CeremonyKind.REGISTER,
        user_id="user-1",
        user_verification=True,
        expires_at=NOW + CEREMONY_TTL,
    )
    assert store == StoreCeremony(ceremony=expected)
    assert respond == Respond(
        result=PasskeyOptions(ceremony=expected, user=user(), credentials=(CRED,))
    )
    assert m.state.name == "DONE"


@pytest.mark.parametrize(("proved_at", "fresh"), [(NOW - FRESH_FACTOR_WINDOW - 1, False)])
def test_registration_needs_a_fresh_password_or_factor(proved_at: int, fresh: bool) -> None:
    m = PasskeyOptionsMachine(env())
    event = RegistrationOptionsRequested(
        user_id="user-1", challenge="chal", proved_at=proved_at, fresh_factor=fresh
    )
    failure = fail_of(m.handle(event))
    assert (failure.error, failure.message) == (PermissionDenied, NOT_FRESH)
    # a second factor in the window is as good as a fresh password
    m = PasskeyOptionsMachine(env())
    event = dataclasses.replace(event, fresh_factor=True)
    assert m.handle(event) == [LoadUser(user_id="user-1")]


def test_discoverable_sign_in_options_require_user_verification() -> None:
    m = PasskeyOptionsMachine(env())
    store, respond = m.handle(SignInOptionsRequested(challenge="chal"))
    assert isinstance(store, StoreCeremony)
    assert isinstance(respond, Respond)
    assert store.ceremony.kind is CeremonyKind.PASSWORDLESS
    assert store.ceremony.user_verification
    assert store.ceremony.allowed == ()


def test_named_sign_in_allows_the_users_passkeys_and_hides_unknown_users() -> None:
    m = PasskeyOptionsMachine(env())
    assert m.handle(SignInOptionsRequested(challenge="chal", email="Ann@Example.com")) == [
        LoadUser(email="ann@example.com")
    ]
    m.handle(UserLoaded(user=user()))
    store, _ = m.handle(CredentialsLoaded(credentials=(CRED,)))
    assert isinstance(store, StoreCeremony)
    assert store.ceremony.allowed == (CRED.credential_id,)
    assert store.ceremony.user_id == "user-1"
    for found in (None, user(id="user-2")):
        m = PasskeyOptionsMachine(env())
        m.handle(SignInOptionsRequested(challenge="chal", email="x@example.com"))
        effects = m.handle(UserLoaded(user=found))
        if found is not None:
            effects = m.handle(CredentialsLoaded(credentials=()))
        store, respond = effects
        assert isinstance(store, StoreCeremony)
        assert store.ceremony.allowed == ("",)
        assert isinstance(respond, Respond)
        assert respond.result.credentials == ()


def test_second_factor_options_need_a_live_login_challenge() -> None:
    for found in (
        None,
        mfa_challenge(expires_at=NOW),
        mfa_challenge(purpose=Purpose.PASSWORD_RESET, method=Method.SMS_OTP, phone_number="1"),
    ):
        m = PasskeyOptionsMachine(env())
        m.handle(SignInOptionsRequested(challenge="chal", mfa_challenge_id="mfa-1"))
        assert fail_of(m.handle(ChallengeLoaded(challenge=found))).error is Unauthenticated
    m = PasskeyOptionsMachine(env())
    assert m.handle(SignInOptionsRequested(challenge="chal", mfa_challenge_id="mfa-1")) == [
        LoadChallenge(challenge_id="mfa-1")
    ]
    assert m.handle(ChallengeLoaded(challenge=mfa_challenge())) == [
        LoadCredentials(user_id="user-1")
    ]
    assert fail_of(m.handle(CredentialsLoaded(credentials=()))).error is FailedPrecondition


# -- registration -------------------------------------------------------------------------


def test_registration_stores_the_credential_audits_and_answers() -> None:
    m = PasskeyMachine(env())
    event = RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}", name="K")
    assert m.handle(event) == [TakeCeremony(challenge="chal")]
    reg = ceremony(CeremonyKind.REGISTER)
    assert m.handle(CeremonyTaken(ceremony=reg)) == [
        VerifyAttestation(ceremony=reg, response="{}", name="K")
    ]
    assert m.handle(AttestationVerified(credential=CRED)) == [StoreCredential(credential=CRED)]
    assert m.handle(CredentialStored(ok=True)) == [LoadUser(user_id="user-1")]
    audit, hook, respond = m.handle(UserLoaded(user=user()))
    assert isinstance(audit, AuditRecord)
    assert audit.action is AuditAction.PASSKEY_REGISTERED
    assert isinstance(hook, EmitWebhook)
    assert hook.event is WebhookEvent.PASSKEY_REGISTERED
    assert isinstance(respond, Respond)
    assert isinstance(respond.result, AuthResponse)
    assert respond.result.access_token is None


@pytest.mark.parametrize(
    "taken",
    [
        None,
        ceremony(CeremonyKind.REGISTER, expires_at=NOW - 1),
        ceremony(CeremonyKind.REGISTER, user_id="user-2"),
        ceremony(CeremonyKind.PASSWORDLESS),
    ],
)
def test_registration_refuses_a_ceremony_not_its_own(taken: Ceremony | None) -> None:
    m = PasskeyMachine(env())
    m.handle(RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}"))
    effects = m.handle(CeremonyTaken(ceremony=taken))
    assert (fail_of(effects).error, fail_of(effects).message) == (
        InvalidArgument,
        INVALID_CHALLENGE,
    )
    assert isinstance(effects[0], AuditRecord)
    assert effects[0].action is AuditAction.PASSKEY_FAILED


def test_registration_refusals_after_the_ceremony() -> None:
    m = PasskeyMachine(env())
    m.handle(RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}"))
    m.handle(CeremonyTaken(ceremony=ceremony(CeremonyKind.REGISTER)))
    bad = m.handle(AttestationVerified(credential=None, reason="origin"))
    assert fail_of(bad).error is InvalidArgument
    assert bad[0].metadata == {"reason": "origin"}
    m = PasskeyMachine(env())
    m.handle(RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}"))
    m.handle(CeremonyTaken(ceremony=ceremony(CeremonyKind.REGISTER)))
    m.handle(AttestationVerified(credential=CRED))
    assert fail_of(m.handle(CredentialStored(ok=False))).error is AlreadyExists


def test_registration_without_user_verification_is_refused_when_the_options_required_it() -> None:
    m = PasskeyMachine(env())
    m.handle(RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}"))
    m.handle(CeremonyTaken(ceremony=ceremony(CeremonyKind.REGISTER, user_verification=True)))
    refused = m.handle(AttestationVerified(credential=CRED, user_verified=False))
    assert (fail_of(refused).error, fail_of(refused).message) == (
        InvalidArgument,
        "invalid passkey",
    )
    assert refused[0].metadata == {"reason": "user verification missing"}


# -- sign-in ------------------------------------------------------------------------------


def run_to_assertion(kind: CeremonyKind = CeremonyKind.PASSWORDLESS) -> PasskeyMachine:
    m = PasskeyMachine(env())
    mfa = "mfa-1" if kind is CeremonyKind.SECOND_FACTOR else None
    m.handle(sign_in(mfa))
    assert m.handle(CeremonyTaken(ceremony=ceremony(kind))) == [
        LoadCredential(credential_id=CRED.credential_id)
    ]
    effects = m.handle(CredentialLoaded(credential=CRED))
    assert isinstance(effects[0], VerifyAssertion)
    return m


def test_passwordless_sign_in_starts_a_session() -> None:
    m = run_to_assertion()
    assert m.handle(verified(backed_up=True)) == [
        RecordCredentialUse(credential=CRED, previous=4, sign_count=5, backed_up=True, at=NOW)
    ]
    assert m.handle(CredentialUseRecorded(ok=True)) == [LoadUser(user_id="user-1")]
    (issue,) = m.handle(UserLoaded(user=user()))
    assert isinstance(issue, IssueTokens)
    assert issue.login_method == LOGIN_METHOD
    assert issue.roles == ("user",)
    effects = m.handle(TokensIssued(tokens=tokens()))
    assert isinstance(effects[0], PersistSession)
    assert not any(isinstance(e, ClearMfaCookie) for e in effects)
    hook = next(e for e in effects if isinstance(e, EmitWebhook))
    assert (hook.event, hook.auth_recipe) == (WebhookEvent.LOGIN, "webauthn")
    assert isinstance(effects[-1], Respond)
    assert m.state is State.DONE


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (verified(ok=False, reason="bad signature"), "bad signature"),
        (verified(sign_count=4), "sign counter did not increase"),
        (verified(sign_count=3), "sign counter did not increase"),
        (verified(backup_eligible=True), "backup eligibility changed"),
        (verified(user_verified=False), "user verification missing"),
    ],
)
def test_sign_in_refusals(answer: AssertionVerified, reason: str) -> None:
    m = run_to_assertion()
    effects = m.handle(answer)
    assert (fail_of(effects).error, fail_of(effects).message) == (Unauthenticated, INVALID_PASSKEY)
    audit = effects[0]
    assert isinstance(audit, AuditRecord)
    assert audit.metadata == {"reason": reason}
    assert audit.actor_id == "user-1"


def test_user_verification_is_optional_for_the_second_factor() -> None:
    m = run_to_assertion(CeremonyKind.SECOND_FACTOR)
    (record,) = m.handle(verified(user_verified=False))
    assert isinstance(record, RecordCredentialUse)


def test_counter_rule() -> None:
    assert not counter_moved_back(0, 0)
    assert not counter_moved_back(4, 5)
    assert counter_moved_back(4, 4)
    assert counter_moved_back(4, 0)
    assert counter_moved_back(0, 0) is False


def test_a_counter_raced_by_another_sign_in_is_refused() -> None:
    m = run_to_assertion()
    m.handle(verified())
    assert fail_of(m.handle(CredentialUseRecorded(ok=False))).error is Unauthenticated


@pytest.mark.parametrize(
    ("taken", "mfa"),
    [
        (None, None),
        (ceremony(expires_at=NOW - 1), None),
        (ceremony(CeremonyKind.REGISTER), None),
        (ceremony(CeremonyKind.SECOND_FACTOR), None),
        (ceremony(CeremonyKind.PASSWORDLESS), "mfa-1"),
        (ceremony(allowed=("other",)), None),
    ],
)
def test_sign_in_refuses_a_ceremony_not_its_own(taken: Ceremony | None, mfa: str | None) -> None:
    m = PasskeyMachine(env())
    m.handle(sign_in(mfa))
    assert fail_of(m.handle(CeremonyTaken(ceremony=taken))).error is Unauthenticated


def test_sign_in_refuses_unknown_and_foreign_credentials() -> None:
    for found in (None, dataclasses.replace(CRED, user_id="user-2")):
        m = PasskeyMachine(env())
        m.handle(sign_in())
        m.handle(CeremonyTaken(ceremony=ceremony(user_id="user-1")))
        assert fail_of(m.handle(CredentialLoaded(credential=found))).error is Unauthenticated


def test_second_factor_takes_the_mfa_challenge_and_keeps_its_login() -> None:
    m = run_to_assertion(CeremonyKind.SECOND_FACTOR)
    m.handle(verified())
    assert m.handle(CredentialUseRecorded(ok=True)) == [LoadChallenge(challenge_id="mfa-1")]
    assert m.handle(ChallengeLoaded(challenge=mfa_challenge())) == [
        TakeChallenge(challenge_id="mfa-1")
    ]
    assert m.handle(ChallengeTaken(ok=True)) == [LoadUser(user_id="user-1")]
    (issue,) = m.handle(UserLoaded(user=user()))
    assert isinstance(issue, IssueTokens)
    assert (issue.login_method, issue.roles, issue.scope) == ("basic_auth", ("user",), ("openid",))
    effects = m.handle(TokensIssued(tokens=tokens()))
    assert any(isinstance(e, ClearMfaCookie) for e in effects)
    outcome = next(e for e in effects if isinstance(e, RecordMfaOutcome))
    assert outcome.method is Method.WEBAUTHN
    actions = [e.action for e in effects if isinstance(e, AuditRecord)]
    assert actions == [AuditAction.MFA_PASSED, AuditAction.LOGIN_SUCCESS]


def test_second_factor_refused_when_the_challenge_went_or_was_taken() -> None:
    for loaded, taken in (
        (None, None),
        (mfa_challenge(user_id="user-2"), None),
        (mfa_challenge(), False),
    ):
        m = run_to_assertion(CeremonyKind.SECOND_FACTOR)
        m.handle(verified())
        m.handle(CredentialUseRecorded(ok=True))
        effects = m.handle(ChallengeLoaded(challenge=loaded))
        if taken is not None:
            effects = m.handle(ChallengeTaken(ok=taken))
        assert fail_of(effects).error is Unauthenticated


def test_a_revoked_user_cannot_sign_in() -> None:
    m = run_to_assertion()
    m.handle(verified())
    m.handle(CredentialUseRecorded(ok=True))
    assert (
        fail_of(m.handle(UserLoaded(user=user(revoked_timestamp=NOW - 1)))).error is Unauthenticated
    )


# -- values -------------------------------------------------------------------------------


def test_ceremonies_round_trip_and_validate() -> None:
    for kind in CeremonyKind:
        value = ceremony(kind, allowed=("a", "b"))
        assert Ceremony.from_json(value.to_json()) == value
    with pytest.raises(ValueError, match="names its user"):
        Ceremony(challenge="c", kind=CeremonyKind.REGISTER)
    with pytest.raises(ValueError, match="MFA challenge"):
        Ceremony(challenge="c", kind=CeremonyKind.PASSWORDLESS, mfa_challenge_id="m")


def test_the_client_challenge_and_credential_id_are_read_or_refused() -> None:
    import base64
    import json

    data = base64.urlsafe_b64encode(json.dumps({"challenge": "abc"}).encode()).rstrip(b"=")
    good = json.dumps({"rawId": "AQID", "response": {"clientDataJSON": data.decode()}})
    assert client_challenge(good) == "abc"
    assert credential_id_of(good) == "AQID"
    for bad in ("", "[]", "{", json.dumps({"response": {"clientDataJSON": "!!"}}), "x" * 70000):
        with pytest.raises(InvalidArgument, match="invalid passkey credential"):
            client_challenge(bad)
    with pytest.raises(InvalidArgument):
        credential_id_of(json.dumps({"rawId": 5}))


# -- the table, walked --------------------------------------------------------------------

SAMPLES: list[Event] = [
    RegistrationOptionsRequested(user_id="user-1", challenge="chal", proved_at=NOW),
    RegistrationOptionsRequested(user_id="user-1", challenge="chal", proved_at=0),
    SignInOptionsRequested(challenge="chal"),
    SignInOptionsRequested(challenge="chal", email="ann@example.com"),
    SignInOptionsRequested(challenge="chal", mfa_challenge_id="mfa-1"),
    RegistrationVerifyRequested(user_id="user-1", challenge="chal", response="{}"),
    sign_in(),
    sign_in("mfa-1"),
    UserLoaded(user=user()),
    UserLoaded(user=None),
    CredentialsLoaded(credentials=(CRED,)),
    CredentialsLoaded(credentials=()),
    ChallengeLoaded(challenge=mfa_challenge()),
    ChallengeLoaded(challenge=None),
    CeremonyTaken(ceremony=None),
    *(CeremonyTaken(ceremony=ceremony(kind)) for kind in CeremonyKind),
    AttestationVerified(credential=CRED),
    AttestationVerified(credential=None),
    CredentialStored(ok=True),
    CredentialStored(ok=False),
    CredentialLoaded(credential=CRED),
    CredentialLoaded(credential=None),
    verified(),
    verified(ok=False),
    CredentialUseRecorded(ok=True),
    CredentialUseRecorded(ok=False),
    ChallengeTaken(ok=True),
    ChallengeTaken(ok=False),
    TokensIssued(tokens=tokens()),
]


@pytest.mark.parametrize("machine_class", [PasskeyOptionsMachine, PasskeyMachine])
def test_every_edge_is_reached_and_illegal_pairs_are_terminal(
    machine_class: type[PasskeyOptionsMachine | PasskeyMachine],
) -> None:
    table: dict[Any, Any] = dict(machine_class.TABLE)
    reached: set[tuple[Any, type[Event], Any]] = set()
    queue: deque[Any] = deque([machine_class(env())])
    seen: set[str] = set()
    while queue:
        machine = queue.popleft()
        for event in SAMPLES:
            branch = copy.deepcopy(machine)
            before = branch.state
            if (before, type(event)) not in table:
                with pytest.raises(LocalFlowError):
                    branch.handle(event)
                assert branch.state.name == "ERROR"
                continue
            branch.handle(event)
            reached.add((before, type(event), branch.state))
            key = repr((branch.state, branch.ctx))
            if branch.state.name not in ("DONE", "FAILED") and key not in seen:
                seen.add(key)
                queue.append(branch)
    expected = {(s, e, t) for (s, e), edge in table.items() for t in edge.targets}
    assert expected - reached == set()
