"""Login: the documented happy path, and the rules that protect accounts."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import Method
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.user import SignupMethod, User
from bastion.core.errors import FailedPrecondition, InvalidArgument, Unauthenticated
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    RehashPassword,
    Respond,
    SendEmail,
    SetSessionCookie,
    VerifyPasswordHash,
    WebhookEvent,
)
from bastion.core.state_machines.events import PasswordVerified, TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import (
    DecideSecondFactor,
    LoginMachine,
    LoginRequested,
    SecondFactorNotRequired,
    SecondFactorRequired,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, PHONE, STRONG, env, tokens, user

INVALID = Fail(error=Unauthenticated, message="invalid credentials")


def test_happy_path_emits_exactly_the_documented_effects() -> None:
    machine, account, issued = LoginMachine(env()), user(), tokens()
    steps = drive(
        machine,
        LoginRequested(email=" Ann@Example.com ", password=STRONG),
        UserLoaded(user=account),
        PasswordVerified(ok=True),
        SecondFactorNotRequired(),
        TokensIssued(tokens=issued),
    )
    assert steps == [
        [LoadUser(email=EMAIL)],
        [VerifyPasswordHash(password=STRONG, password_hash=account.password_hash)],
        [
            DecideSecondFactor(
                user=account, login_method="basic_auth", channel=SignupMethod.BASIC_AUTH
            )
        ],
        [
            IssueTokens(
                user=account,
                roles=("user",),
                scope=DEFAULT_SCOPE,
                login_method="basic_auth",
                nonce="id-1",
                include_refresh_token=False,
            )
        ],
        [
            PersistSession(user_id="user-1", login_method="basic_auth", tokens=issued),
            SetSessionCookie(value="session-blob"),
            EmitWebhook(event=WebhookEvent.LOGIN, user=account, auth_recipe="basic_auth"),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
            ),
            Respond(result=AuthResponse.with_tokens("Logged in successfully", account, issued)),
        ],
    ]
    assert machine.state is State.DONE
    respond = steps[-1][-1]
    assert isinstance(respond, Respond)
    body = respond.result.to_api_dict()
    assert body["id_token"] == "id.jwt"
    assert body["user"]["email"] == EMAIL


@pytest.mark.parametrize(
    "account",
    [
        None,
        user(email_verified_at=None),
        user(revoked_timestamp=1),
        user(signup_methods=("magic_link_login",), password_hash=None),
    ],
    ids=["unknown", "unverified", "revoked", "passwordless"],
)
def test_password_is_verified_before_anything_about_the_account(account: User | None) -> None:
    """Issue #458 fixed: whatever the account, the next step is a hash verification."""
    machine = LoginMachine(env(email_enabled=True, enable_email_verification=True))
    effects = last(machine, LoginRequested(email=EMAIL, password=STRONG), UserLoaded(user=account))
    stored = None if account is None else account.password_hash
    assert effects == [VerifyPasswordHash(password=STRONG, password_hash=stored)]


def test_unknown_identifier_costs_a_dummy_verification_then_invalid_credentials() -> None:
    machine = LoginMachine(env())
    steps = drive(
        machine,
        LoginRequested(email=EMAIL, password=STRONG),
        UserLoaded(user=None),
        PasswordVerified(ok=False),
    )
    assert steps[1] == [VerifyPasswordHash(password=STRONG, password_hash=None)]
    assert steps[2] == [INVALID]
    assert machine.state is State.FAILED


def test_wrong_password_on_an_unverified_account_sends_nothing() -> None:
    machine = LoginMachine(env(email_enabled=True, enable_email_verification=True))
    effects = last(
        machine,
        LoginRequested(email=EMAIL, password="wrong"),
        UserLoaded(user=user(email_verified_at=None)),
        PasswordVerified(ok=False),
    )
    assert not any(isinstance(e, SendEmail) for e in effects)
    assert effects[-1] == INVALID
    assert isinstance(effects[0], AuditRecord)
    assert effects[0].action is AuditAction.LOGIN_FAILED


@pytest.mark.parametrize(
    "account",
    [
        user(revoked_timestamp=1),
        user(email_verified_at=None),
        user(signup_methods=("mobile_basic_auth",)),
    ],
    ids=["revoked", "unverified", "other-signup-method"],
)
def test_every_account_problem_is_invalid_credentials(account: User) -> None:
    machine = LoginMachine(env())
    effects = last(
        machine,
        LoginRequested(email=EMAIL, password=STRONG),
        UserLoaded(user=account),
        PasswordVerified(ok=True),
    )
    assert effects == [INVALID]


def test_roles_default_to_default_roles_and_must_be_held() -> None:
    account = user(roles=("editor", "user"))
    granted = last(
        LoginMachine(env()),
        LoginRequested(email=EMAIL, password=STRONG, roles=("editor",)),
        UserLoaded(user=account),
        PasswordVerified(ok=True),
        SecondFactorNotRequired(),
    )
    assert isinstance(granted[0], IssueTokens)
    assert granted[0].roles == ("editor",)
    refused = last(
        LoginMachine(env()),
        LoginRequested(email=EMAIL, password=STRONG, roles=("admin",)),
        UserLoaded(user=account),
        PasswordVerified(ok=True),
    )
    assert refused == [Fail(error=InvalidArgument, message="invalid roles")]


def test_outdated_hash_is_replaced_once_the_password_is_known() -> None:
    account = user()
    effects = last(
        LoginMachine(env()),
        LoginRequested(email=EMAIL, password=STRONG),
        UserLoaded(user=account),
        PasswordVerified(ok=True, needs_rehash=True),
    )
    assert effects[0] == RehashPassword(user_id="user-1", password=STRONG)
    assert isinstance(effects[1], DecideSecondFactor)


def test_phone_login_keeps_basic_auth_as_login_method() -> None:
    account = user(
        phone_number=PHONE, phone_number_verified_at=1, signup_methods=("mobile_basic_auth",)
    )
    machine = LoginMachine(env())
    steps = drive(
        machine,
        LoginRequested(phone_number=PHONE, password=STRONG, scope=("openid", "offline_access")),
        UserLoaded(user=account),
        PasswordVerified(ok=True),
        SecondFactorNotRequired(),
        TokensIssued(tokens=tokens(refresh=True)),
    )
    assert steps[0] == [LoadUser(phone_number=PHONE)]
    issue = steps[3][0]
    assert isinstance(issue, IssueTokens)
    assert (issue.login_method, issue.include_refresh_token) == ("basic_auth", True)
    webhook = steps[4][2]
    assert webhook == EmitWebhook(
        event=WebhookEvent.LOGIN, user=account, auth_recipe="mobile_basic_auth"
    )


def test_second_factor_hands_over_to_the_mfa_flow() -> None:
    machine = LoginMachine(env())
    effects = last(
        machine,
        LoginRequested(email=EMAIL, password=STRONG, state="authz"),
        UserLoaded(user=user()),
        PasswordVerified(ok=True),
        SecondFactorRequired(method=Method.EMAIL_OTP),
    )
    request = ChallengeRequested(
        user=user(), method=Method.EMAIL_OTP, roles=("user",), scope=DEFAULT_SCOPE, state="authz"
    )
    assert effects == [StartChallenge(request=request)]
    assert (effects[0].flow, effects[0].event, effects[0].method) == (
        "mfa",
        request,
        Method.EMAIL_OTP,
    )
    assert machine.state is State.SECOND_FACTOR_REQUIRED


def test_a_parked_login_serialises_without_the_password_hash() -> None:
    machine = LoginMachine(env())
    drive(
        machine,
        LoginRequested(email=EMAIL, password=STRONG, state="authz"),
        UserLoaded(user=user()),
        PasswordVerified(ok=True),
        SecondFactorRequired(method=Method.TOTP),
    )
    parked = machine.to_dict()
    assert parked["state"] == "SECOND_FACTOR_REQUIRED"
    assert parked["context"]["oauth_state"] == "authz"
    assert parked["context"]["user"]["password_hash"] is None
    assert parked["redacted"] is True
    assert "$argon2id$stored" not in json.dumps(parked)
    restored = LoginMachine.from_dict(parked, env())
    assert restored.ctx.user == dataclasses.replace(user(), password_hash=None)
    assert restored.ctx.roles == ("user",)
    assert not restored.resumable


@pytest.mark.parametrize(
    ("request_", "overrides", "error", "message"),
    [
        (LoginRequested(password=STRONG), {}, InvalidArgument, "email or phone number is required"),
        (
            LoginRequested(email=EMAIL, password=STRONG),
            {"enable_basic_authentication": False},
            FailedPrecondition,
            "basic authentication is disabled for this instance",
        ),
        (
            LoginRequested(phone_number=PHONE, password=STRONG),
            {"enable_mobile_basic_authentication": False},
            FailedPrecondition,
            "mobile basic authentication is disabled for this instance",
        ),
    ],
)
def test_request_checks(
    request_: LoginRequested, overrides: dict[str, bool], error: type, message: str
) -> None:
    machine = LoginMachine(env(**overrides))
    assert machine.handle(request_) == [Fail(error=error, message=message)]
    assert machine.state is State.FAILED
    assert not machine.holds_secret


def test_password_never_shows_in_reprs() -> None:
    event = LoginRequested(email=EMAIL, password=STRONG)
    assert STRONG not in repr(event)
    assert STRONG not in repr(dataclasses.replace(event))
