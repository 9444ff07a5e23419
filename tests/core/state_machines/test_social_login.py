"""The social login flow's account decisions (core.state_machines.social_login)."""

from __future__ import annotations

import pytest

from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.social.profile import SocialProfile
from bastion.core.social.providers import Provider
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    DeleteUserSessions,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
)
from bastion.core.state_machines.social_login import (
    NO_VERIFIED_EMAIL,
    SocialLoginMachine,
    SocialLoginRequested,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, env, tokens, user

PROFILE = SocialProfile(
    subject="g-1", email="Ann@Example.com", email_verified=True, given_name="Ann"
)


def request(**changes: object) -> SocialLoginRequested:
    base: dict[str, object] = {"provider": Provider.GOOGLE, "profile": PROFILE}
    base.update(changes)
    return SocialLoginRequested(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "profile",
    [
        SocialProfile(subject="g-1", email=EMAIL),
        SocialProfile(subject="g-1", email_verified=True),
        SocialProfile(subject="g-1"),
    ],
)
def test_nothing_happens_without_a_verified_address(profile: SocialProfile) -> None:
    machine = SocialLoginMachine(env())
    effects = machine.handle(request(profile=profile))
    assert effects == [Fail(error=FailedPrecondition, message=NO_VERIFIED_EMAIL)]
    assert machine.state is State.FAILED


def test_a_new_person_gets_a_verified_account_with_the_provider() -> None:
    machine = SocialLoginMachine(env())
    (load,) = machine.handle(request(roles=("editor",)))
    assert load == LoadUser(email=EMAIL)
    *signup, create = machine.handle(UserLoaded(user=None))
    assert isinstance(create, CreateUser)
    new = create.user
    # The signup is queued before the creation, to commit with the row.
    assert [(e.event, e.auth_recipe) for e in signup if isinstance(e, EmitWebhook)] == [
        (WebhookEvent.SIGNUP, "google")
    ]
    assert [e.action for e in signup if isinstance(e, AuditRecord)] == [AuditAction.SIGNUP]
    assert len(signup) == 2
    assert new.email == EMAIL
    assert new.email_verified_at == NOW
    assert new.signup_methods == ("google",)
    assert new.given_name == "Ann"
    assert new.roles == ("editor",)
    assert new.password_hash is None
    (issue,) = machine.handle(UserCreated(user=new))
    assert isinstance(issue, IssueTokens)
    assert (issue.login_method, issue.roles) == ("google", ("editor",))
    done = machine.handle(TokensIssued(tokens=tokens()))
    hooks = [(e.event, e.auth_recipe) for e in done if isinstance(e, EmitWebhook)]
    assert hooks == [(WebhookEvent.LOGIN, "google")]
    audits = [e.action for e in done if isinstance(e, AuditRecord)]
    assert audits == [AuditAction.OAUTH_CALLBACK_SUCCESS]
    assert isinstance(done[0], PersistSession)
    assert done[0].login_method == "google"
    assert isinstance(done[-1], Respond)


def test_someone_else_creating_the_account_first_means_linking_it() -> None:
    machine = SocialLoginMachine(env())
    drive(machine, request(), UserLoaded(user=None))
    assert machine.handle(UserAlreadyExists()) == [LoadUser(email=EMAIL)]
    assert machine.state is State.LOADING_USER


def test_a_known_account_gains_the_provider_and_keeps_its_password() -> None:
    machine = SocialLoginMachine(env())
    found = user(given_name=None)
    update, issue = last(machine, request(), UserLoaded(user=found))
    assert isinstance(update, UpdateUser)
    assert update.user.signup_methods == ("basic_auth", "google")
    assert update.user.password_hash == found.password_hash
    assert update.user.given_name == "Ann"
    assert isinstance(issue, IssueTokens)
    assert issue.roles == ("user",)
    done = machine.handle(TokensIssued(tokens=tokens()))
    assert [e.event for e in done if isinstance(e, EmitWebhook)] == [WebhookEvent.LOGIN]


def test_an_account_whose_address_we_never_verified_loses_the_unproven_password() -> None:
    machine = SocialLoginMachine(env())
    left = user(email_verified_at=None, enrolled_mfa_methods=("webauthn", "email_otp"))
    update, end_sessions, issue = last(machine, request(), UserLoaded(user=left))
    assert isinstance(update, UpdateUser)
    assert update.user.password_hash is None
    assert update.user.email_verified_at == NOW
    # and every other credential (issue 36): passkeys, the authenticator, sessions
    assert update.user.enrolled_mfa_methods == ("email_otp",)
    assert end_sessions == DeleteUserSessions(user_id="user-1", end_credentials=True)
    assert isinstance(issue, IssueTokens)


def test_an_already_linked_account_is_not_rewritten() -> None:
    machine = SocialLoginMachine(env())
    linked = user(signup_methods=("google",), given_name="Ann", roles=("user",))
    (issue,) = last(machine, request(), UserLoaded(user=linked))
    assert isinstance(issue, IssueTokens)


@pytest.mark.parametrize(
    ("found", "changes", "policy", "error"),
    [
        (user(revoked_timestamp=NOW - 1), {}, {}, FailedPrecondition),
        (None, {}, {"enable_signup": False}, FailedPrecondition),
        (None, {"roles": ("admin",)}, {}, InvalidArgument),
        (user(), {"roles": ("admin",)}, {}, InvalidArgument),
    ],
)
def test_refusals(
    found: object, changes: dict[str, object], policy: dict[str, object], error: type
) -> None:
    machine = SocialLoginMachine(env(**policy))
    effects = last(machine, request(**changes), UserLoaded(user=found))  # type: ignore[arg-type]
    assert isinstance(effects[-1], Fail)
    assert effects[-1].error is error
