"""magic_link_login: sends or errors, creates or upgrades the account."""

from __future__ import annotations

import pytest

from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.responses import MessageResponse
from bastion.core.auth.user import User
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    CreateVerificationRequest,
    EmitWebhook,
    Fail,
    LoadUser,
    Respond,
    SendEmail,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
    VerificationRequestCreated,
)
from bastion.core.state_machines.magic_link import (
    LINK_SENT,
    MagicLinkMachine,
    MagicLinkRequested,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, URL, env, user

ON = {"enable_magic_link_login": True, "email_enabled": True}
ANSWER = Respond(result=MessageResponse(message=LINK_SENT))


def test_new_email_creates_the_account_and_mails_the_link() -> None:
    machine = MagicLinkMachine(env(**ON))
    created = User(
        id="id-1",
        email=EMAIL,
        signup_methods=("magic_link_login",),
        roles=("user",),
        created_at=NOW,
        updated_at=NOW,
        is_multi_factor_auth_enabled=True,
    )
    steps = drive(
        machine,
        MagicLinkRequested(email="Ann@Example.com", state="st"),
        UserLoaded(user=None),
        UserCreated(user=created),
        VerificationRequestCreated(token="link.jwt"),
    )
    redirect = f"{URL}/app?state=st&scope=openid+email+profile"
    assert steps[:3] == [
        [LoadUser(email=EMAIL)],
        [
            EmitWebhook(event=WebhookEvent.CREATED, user=created),  # committed with the row
            CreateUser(user=created, lock_keys=("email:ann@example.com",)),
        ],
        [
            CreateVerificationRequest(
                email=EMAIL,
                identifier=EmailEvent.MAGIC_LINK_LOGIN,
                nonce="id-2",
                redirect_uri=redirect,
                issued_at=NOW,
                expires_at=NOW + 1800,
            )
        ],
    ]
    link = (
        f"{URL}/verify_email?token=link.jwt&redirect_uri="
        "https%3A%2F%2Fauth.example.com%2Fapp%3Fstate%3Dst%26scope%3Dopenid%2Bemail%2Bprofile"
    )
    assert steps[3] == [
        SendEmail(event=EmailEvent.MAGIC_LINK_LOGIN, to=EMAIL, user=created, verification_url=link),
        AuditRecord(
            action=AuditAction.MAGIC_LINK_REQUESTED,
            actor_id="id-1",
            actor_email=EMAIL,
            resource_id="id-1",
        ),
        ANSWER,
    ]
    assert machine.state is State.DONE


def test_known_account_gains_the_method_and_requested_role() -> None:
    machine = MagicLinkMachine(env(**ON))
    effects = last(
        machine,
        MagicLinkRequested(email=EMAIL, roles=("editor",)),
        UserLoaded(user=user(roles=("user",))),
    )
    upgraded = user(
        roles=("user", "editor"),
        signup_methods=("basic_auth", "magic_link_login"),
        updated_at=NOW,
    )
    assert effects[0] == UpdateUser(user=upgraded)
    assert isinstance(effects[1], CreateVerificationRequest)
    assert effects[1].redirect_uri == f"{URL}/app?roles=editor&scope=openid+email+profile"


def test_unchanged_account_is_not_rewritten() -> None:
    account = user(signup_methods=("magic_link_login",))
    effects = last(
        MagicLinkMachine(env(**ON)), MagicLinkRequested(email=EMAIL), UserLoaded(user=account)
    )
    assert [type(e) for e in effects] == [CreateVerificationRequest]


def test_protected_role_is_refused() -> None:
    effects = last(
        MagicLinkMachine(env(**ON)),
        MagicLinkRequested(email=EMAIL, roles=("admin",)),
        UserLoaded(user=user()),
    )
    assert effects == [Fail(error=InvalidArgument, message="invalid roles")]


def test_revoked_account_gets_the_same_answer_and_no_mail() -> None:
    machine = MagicLinkMachine(env(**ON))
    effects = last(
        machine, MagicLinkRequested(email=EMAIL), UserLoaded(user=user(revoked_timestamp=1))
    )
    assert effects == [ANSWER]


def test_lost_creation_race_loads_the_winner() -> None:
    machine = MagicLinkMachine(env(**ON))
    effects = last(
        machine, MagicLinkRequested(email=EMAIL), UserLoaded(user=None), UserAlreadyExists()
    )
    assert effects == [LoadUser(email=EMAIL)]
    assert machine.state is State.LOADING_USER


@pytest.mark.parametrize(
    ("policy", "email", "error", "message"),
    [
        ({"email_enabled": True}, EMAIL, FailedPrecondition,
         "magic link login is disabled for this instance"),
        ({"enable_magic_link_login": True}, EMAIL, FailedPrecondition,
         "email service not enabled"),
        (ON, "nope", InvalidArgument, "invalid email address"),
    ],
)  # fmt: skip
def test_either_sends_or_errors(
    policy: dict[str, bool], email: str, error: type, message: str
) -> None:
    machine = MagicLinkMachine(env(**policy))
    assert machine.handle(MagicLinkRequested(email=email)) == [Fail(error=error, message=message)]


def test_unknown_email_with_signup_disabled() -> None:
    effects = last(
        MagicLinkMachine(env(enable_signup=False, **ON)),
        MagicLinkRequested(email=EMAIL),
        UserLoaded(user=None),
    )
    assert effects == [
        Fail(error=FailedPrecondition, message="signup is disabled for this instance")
    ]
