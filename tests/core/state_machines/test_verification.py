"""verify_email and resend_verify_email."""

from __future__ import annotations

import pytest

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.responses import AuthResponse, MessageResponse
from bastion.core.auth.user import User, identifier_digest
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateVerificationRequest,
    DeleteVerificationRequest,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    LoadVerificationRequest,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    TokensIssued,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from bastion.core.state_machines.verification import (
    RESENT,
    ResendVerifyEmailRequested,
    State,
    VerificationMachine,
    VerifyEmailRequested,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import (
    EMAIL,
    NOW,
    URL,
    env,
    link_claims,
    request_row,
    tokens,
    user,
)

#: the user the loaded row belongs to: what a valid signer cookie names
USER_ID = "user-1"

SIGNUP_ROW = request_row(EmailEvent.BASIC_AUTH_SIGNUP)
LOADED = VerificationRequestLoaded(request=SIGNUP_ROW, claims=link_claims(SIGNUP_ROW))


def test_verify_email_happy_path_completes_a_signup() -> None:
    """Followed by the browser that signed up (its signer cookie): the password stays. The
    session is kept first; the user row, the spent link, the webhooks and the audit row
    come after it, committed together (issue 27)."""
    machine, pending, issued = VerificationMachine(env()), user(email_verified_at=None), tokens()
    verified = user(email_verified_at=NOW, updated_at=NOW)
    steps = drive(
        machine,
        VerifyEmailRequested(token="link.jwt", signer=USER_ID),
        LOADED,
        UserLoaded(user=pending),
        TokensIssued(tokens=issued),
    )
    assert steps == [
        [LoadVerificationRequest(token="link.jwt")],
        [LoadUser(email=EMAIL)],
        [
            IssueTokens(
                user=verified,
                roles=("user",),
                scope=DEFAULT_SCOPE,
                login_method="basic_auth",
                nonce="id-1",
                include_refresh_token=False,
            ),
        ],
        [
            PersistSession(user_id="user-1", login_method="basic_auth", tokens=issued),
            SetSessionCookie(value="session-blob"),
            UpdateUser(user=verified),
            DeleteVerificationRequest(request_id="vr-1"),
            EmitWebhook(event=WebhookEvent.SIGNUP, user=verified, auth_recipe="basic_auth"),
            EmitWebhook(event=WebhookEvent.LOGIN, user=verified, auth_recipe="basic_auth"),
            AuditRecord(
                action=AuditAction.EMAIL_VERIFIED,
                actor_id="user-1",
                actor_email=EMAIL,
                resource_id="user-1",
            ),
            Respond(
                result=AuthResponse.with_tokens("Email verified successfully.", verified, issued)
            ),
        ],
    ]
    assert machine.state is State.DONE


def verified_user(event: VerifyEmailRequested, loaded: VerificationRequestLoaded) -> User:
    """What the flow writes for an unverified user with a password who follows the link."""
    steps = drive(
        VerificationMachine(env()),
        event,
        loaded,
        UserLoaded(user=user(email_verified_at=None)),
        TokensIssued(tokens=tokens()),
    )
    (update,) = [e for e in steps[-1] if isinstance(e, UpdateUser)]
    return update.user


@pytest.mark.parametrize(
    "signer",
    [None, "user-2", identifier_digest(EMAIL)],
    ids=["no signer cookie", "another account's signer", "the address's digest"],
)
def test_a_signup_link_followed_elsewhere_clears_the_password(signer: str | None) -> None:
    """Proving the address from anywhere but the signing-up browser does not prove its
    owner chose the password: a stranger may have signed up with it."""
    event = VerifyEmailRequested(token="link.jwt", signer=signer)
    written = verified_user(event, LOADED)
    assert written.email_verified_at == NOW
    assert written.password_hash is None


def test_an_email_change_link_keeps_the_password() -> None:
    """The signed-in holder asked for the change: the password is theirs."""
    row = request_row(EmailEvent.UPDATE_EMAIL)
    loaded = VerificationRequestLoaded(request=row, claims=link_claims(row))
    written = verified_user(VerifyEmailRequested(token="link.jwt"), loaded)
    assert written.password_hash == "$argon2id$stored"


def test_a_magic_link_clears_the_password_even_from_the_signer() -> None:
    row = request_row(EmailEvent.MAGIC_LINK_LOGIN)
    loaded = VerificationRequestLoaded(request=row, claims=link_claims(row))
    event = VerifyEmailRequested(token="link.jwt", signer=USER_ID)
    assert verified_user(event, loaded).password_hash is None


def test_magic_link_logs_in_with_its_own_method_and_skips_the_update() -> None:
    row = request_row(EmailEvent.MAGIC_LINK_LOGIN)
    machine = VerificationMachine(env())
    steps = drive(
        machine,
        VerifyEmailRequested(token="link.jwt", scope=("openid", "offline_access")),
        VerificationRequestLoaded(request=row, claims=link_claims(row)),
        UserLoaded(user=user()),
        TokensIssued(tokens=tokens(refresh=True)),
    )
    (issue,) = steps[2]
    assert isinstance(issue, IssueTokens)
    assert (issue.login_method, issue.include_refresh_token) == ("magic_link_login", True)
    assert not any(isinstance(e, UpdateUser) for e in steps[3])
    assert DeleteVerificationRequest(request_id="vr-1") in steps[3]
    hooks = [e for e in steps[3] if isinstance(e, EmitWebhook)]
    assert hooks == [
        EmitWebhook(event=WebhookEvent.LOGIN, user=user(), auth_recipe="magic_link_login")
    ]


@pytest.mark.parametrize(
    "loaded",
    [
        VerificationRequestLoaded(request=None),
        VerificationRequestLoaded(request=SIGNUP_ROW, claims=None),
        VerificationRequestLoaded(request=SIGNUP_ROW, claims=link_claims(SIGNUP_ROW, nonce="x")),
        VerificationRequestLoaded(
            request=SIGNUP_ROW, claims=link_claims(SIGNUP_ROW, sub="eve@x.io")
        ),
        VerificationRequestLoaded(request=SIGNUP_ROW, claims=link_claims(SIGNUP_ROW, exp=NOW)),
        VerificationRequestLoaded(request=SIGNUP_ROW, claims=link_claims(SIGNUP_ROW, aud="other")),
        VerificationRequestLoaded(
            request=request_row(EmailEvent.FORGOT_PASSWORD),
            claims=link_claims(request_row(EmailEvent.FORGOT_PASSWORD)),
        ),
    ],
    ids=["no-row", "unreadable", "nonce", "subject", "expired", "audience", "reset-link"],
)
def test_bad_tokens_are_invalid_verification_token(loaded: VerificationRequestLoaded) -> None:
    machine = VerificationMachine(env())
    assert last(machine, VerifyEmailRequested(token="t"), loaded) == [
        Fail(error=InvalidArgument, message="invalid verification token")
    ]


def test_revoked_user_cannot_verify() -> None:
    effects = last(
        VerificationMachine(env()),
        VerifyEmailRequested(token="t"),
        LOADED,
        UserLoaded(user=user(revoked_timestamp=1)),
    )
    assert effects == [Fail(error=FailedPrecondition, message="user access has been revoked")]


def test_resend_replaces_the_pending_request_and_mails_it() -> None:
    machine, account = VerificationMachine(env(email_enabled=True)), user(email_verified_at=None)
    steps = drive(
        machine,
        ResendVerifyEmailRequested(email="ANN@example.com", identifier="basic_auth_signup"),
        UserLoaded(user=account),
        VerificationRequestLoaded(request=SIGNUP_ROW),
        VerificationRequestCreated(token="new.jwt"),
    )
    assert steps[:3] == [
        [LoadUser(email=EMAIL)],
        [LoadVerificationRequest(email=EMAIL, identifier=EmailEvent.BASIC_AUTH_SIGNUP)],
        [
            DeleteVerificationRequest(request_id="vr-1"),
            CreateVerificationRequest(
                email=EMAIL,
                identifier=EmailEvent.BASIC_AUTH_SIGNUP,
                nonce="id-1",
                redirect_uri=f"{URL}/app",
                issued_at=NOW,
                expires_at=NOW + 1800,
            ),
        ],
    ]
    link = f"{URL}/verify_email?token=new.jwt&redirect_uri=https%3A%2F%2Fauth.example.com%2Fapp"
    assert steps[3] == [
        SendEmail(
            event=EmailEvent.BASIC_AUTH_SIGNUP, to=EMAIL, user=account, verification_url=link
        ),
        AuditRecord(
            action=AuditAction.VERIFY_EMAIL_RESENT,
            actor_id="user-1",
            actor_email=EMAIL,
            resource_id="user-1",
        ),
        Respond(result=MessageResponse(message=RESENT)),
    ]


def test_resend_of_a_reset_link_points_at_the_reset_page() -> None:
    row = request_row(EmailEvent.FORGOT_PASSWORD, redirect_uri="https://app.example.com/reset")
    effects = last(
        VerificationMachine(env(email_enabled=True)),
        ResendVerifyEmailRequested(email=EMAIL, identifier="forgot_password"),
        UserLoaded(user=user()),
        VerificationRequestLoaded(request=row),
        VerificationRequestCreated(token="new.jwt"),
    )
    assert isinstance(effects[0], SendEmail)
    assert effects[0].verification_url == "https://app.example.com/reset?token=new.jwt"


@pytest.mark.parametrize(
    "events",
    [
        (UserLoaded(user=None),),
        (UserLoaded(user=user()), VerificationRequestLoaded(request=None)),
    ],
    ids=["unknown-user", "nothing-pending"],
)
def test_resend_answers_the_same_when_nothing_is_sent(events: tuple[object, ...]) -> None:
    machine = VerificationMachine(env(email_enabled=True))
    effects = last(
        machine,
        ResendVerifyEmailRequested(email=EMAIL, identifier="basic_auth_signup"),
        *events,  # type: ignore[arg-type]
    )
    assert effects == [Respond(result=MessageResponse(message=RESENT))]
    assert machine.state is State.DONE


@pytest.mark.parametrize(
    ("request_", "mail", "error", "message"),
    [
        (ResendVerifyEmailRequested(email=EMAIL, identifier="basic_auth_signup"), False,
         FailedPrecondition, "email service not enabled"),
        (ResendVerifyEmailRequested(email="nope", identifier="basic_auth_signup"), True,
         InvalidArgument, "invalid email"),
        (ResendVerifyEmailRequested(email=EMAIL, identifier="magic_link_login"), True,
         InvalidArgument, "invalid identifier"),
    ],
)  # fmt: skip
def test_resend_checks(
    request_: ResendVerifyEmailRequested, mail: bool, error: type, message: str
) -> None:
    assert VerificationMachine(env(email_enabled=mail)).handle(request_) == [
        Fail(error=error, message=message)
    ]
