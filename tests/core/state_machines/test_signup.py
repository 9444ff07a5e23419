"""Signup: both documented happy paths, the validation order, and the taken identity."""

from __future__ import annotations

import dataclasses

import pytest

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.user import User
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    CreateVerificationRequest,
    DeleteSession,
    EmitWebhook,
    Fail,
    HashPassword,
    IssueTokens,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    VerificationRequestCreated,
)
from bastion.core.state_machines.signup import SignupMachine, SignupRequested, State
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import EMAIL, NOW, PHONE, STRONG, URL, env, tokens

REQUEST = SignupRequested(
    email=EMAIL, password=STRONG, confirm_password=STRONG, given_name="Ann", app_data={"k": 1}
)


def new_user(**overrides: object) -> User:
    base: dict[str, object] = {
        "id": "id-1",
        "email": EMAIL,
        "email_verified_at": NOW,
        "password_hash": "$argon2id$new",
        "signup_methods": ("basic_auth",),
        "given_name": "Ann",
        "roles": ("user",),
        "created_at": NOW,
        "updated_at": NOW,
        "is_multi_factor_auth_enabled": True,
        "app_data": {"k": 1},
    }
    base.update(overrides)
    return User(**base)  # type: ignore[arg-type]


HASHED = PasswordHashed(password_hash="$argon2id$new")


def test_happy_path_keeps_the_session_before_the_user_row_and_answers_no_id_token() -> None:
    """Without a verification step the durable commit comes last: the user row, with its
    webhooks and audit row queued before it, after the session is kept."""
    machine, created, issued = SignupMachine(env()), new_user(), tokens()
    steps = drive(
        machine,
        REQUEST,
        HASHED,
        TokensIssued(tokens=issued),
        UserCreated(user=created),
    )
    audit = AuditRecord(
        action=AuditAction.SIGNUP, actor_id="id-1", actor_email=EMAIL, resource_id="id-1"
    )
    assert steps == [
        [HashPassword(password=STRONG)],
        [
            IssueTokens(
                user=created,
                roles=("user",),
                scope=DEFAULT_SCOPE,
                login_method="basic_auth",
                nonce="id-2",
                include_refresh_token=False,
            )
        ],
        [
            PersistSession(user_id="id-1", login_method="basic_auth", tokens=issued),
            SetSessionCookie(value="session-blob"),
            EmitWebhook(event=WebhookEvent.CREATED, user=created),
            EmitWebhook(event=WebhookEvent.SIGNUP, user=created, auth_recipe="basic_auth"),
            EmitWebhook(event=WebhookEvent.LOGIN, user=created, auth_recipe="basic_auth"),
            audit,
            CreateUser(user=created, lock_keys=("email:ann@example.com",)),
        ],
        [
            Respond(
                result=AuthResponse(
                    message="Signed up successfully.",
                    user=created,
                    access_token="access.jwt",
                    expires_in=1800,
                )
            ),
        ],
    ]
    assert machine.state is State.DONE


def test_with_email_verification_a_link_is_sent_and_no_tokens() -> None:
    machine = SignupMachine(env(enable_email_verification=True, email_enabled=True))
    created = new_user(email_verified_at=None)
    steps = drive(
        machine,
        REQUEST,
        PasswordHashed(password_hash="$argon2id$new"),
        UserCreated(user=created),
        VerificationRequestCreated(token="link.jwt"),
    )
    assert steps[1] == [CreateUser(user=created, lock_keys=("email:ann@example.com",))]
    assert steps[2] == [
        CreateVerificationRequest(
            email=EMAIL,
            identifier=EmailEvent.BASIC_AUTH_SIGNUP,
            nonce="id-2",
            redirect_uri=f"{URL}/app",
            issued_at=NOW,
            expires_at=NOW + 1800,
        )
    ]
    link = f"{URL}/verify_email?token=link.jwt&redirect_uri=https%3A%2F%2Fauth.example.com%2Fapp"
    assert steps[3] == [
        SendEmail(
            event=EmailEvent.BASIC_AUTH_SIGNUP, to=EMAIL, user=created, verification_url=link
        ),
        EmitWebhook(event=WebhookEvent.CREATED, user=created),
        AuditRecord(
            action=AuditAction.SIGNUP, actor_id="id-1", actor_email=EMAIL, resource_id="id-1"
        ),
        Respond(
            result=AuthResponse(message="Verification email has been sent. Please check your inbox")
        ),
    ]


def test_verification_asked_but_no_mail_configured_counts_the_email_as_verified() -> None:
    machine = SignupMachine(env(enable_email_verification=True, email_enabled=False))
    effects = last(machine, REQUEST, HASHED, TokensIssued(tokens=tokens()))
    assert isinstance(effects[-1], CreateUser)
    assert effects[-1].user.email_verified_at == NOW


TAKEN = Fail(
    error=InvalidArgument,
    message="signup failed. please check your credentials or try a different method",
)


def test_a_taken_identity_is_the_vague_signup_failure_and_drops_the_session_kept() -> None:
    machine = SignupMachine(env())
    effects = last(
        machine, REQUEST, HASHED, TokensIssued(tokens=tokens(nonce="n-1")), UserAlreadyExists()
    )
    ended = DeleteSession(user_id="id-1", login_method="basic_auth", nonce="n-1")
    assert effects == [ended, TAKEN]
    assert machine.state is State.FAILED


def test_a_taken_identity_with_verification_asked_keeps_nothing_to_drop() -> None:
    machine = SignupMachine(env(enable_email_verification=True, email_enabled=True))
    assert last(machine, REQUEST, HASHED, UserAlreadyExists()) == [TAKEN]


def test_phone_signup_records_mobile_basic_auth_but_logs_in_with_basic_auth() -> None:
    request = dataclasses.replace(REQUEST, phone_number=PHONE)
    machine = SignupMachine(env(enforce_mfa=False))
    steps = drive(machine, request, HASHED, TokensIssued(tokens=tokens()))
    issue, create = steps[1][0], steps[2][-1]
    assert isinstance(issue, IssueTokens)
    assert issue.login_method == "basic_auth"
    assert isinstance(create, CreateUser)
    assert create.lock_keys == ("email:ann@example.com", f"phone:{PHONE}")
    assert create.user.signup_methods == ("mobile_basic_auth",)
    assert create.user.phone_number_verified_at == NOW
    assert create.user.is_multi_factor_auth_enabled is None
    recipes = [e.auth_recipe for e in steps[2] if isinstance(e, EmitWebhook)]
    assert recipes == ["", "mobile_basic_auth", "mobile_basic_auth"]


WEAK = (
    "password is not valid. It needs to be at least 6 characters long and contain at least "
    "one number, one uppercase letter, one lowercase letter and one special character"
)


@pytest.mark.parametrize(
    ("changes", "policy", "error", "message"),
    [
        ({"email": "  "}, {}, InvalidArgument, "email or phone number is required"),
        ({}, {"enable_signup": False}, FailedPrecondition, "signup is disabled for this instance"),
        (
            {"confirm_password": "other"},
            {},
            InvalidArgument,
            "password and confirm password does not match",
        ),
        (
            {"password": "Ab1!", "confirm_password": "Ab1!"},
            {},
            InvalidArgument,
            "password must be of minimum 6 characters and maximum 36 characters",
        ),
        ({"password": "abcdefg", "confirm_password": "abcdefg"}, {}, InvalidArgument, WEAK),
        (
            {},
            {"enable_basic_authentication": False},
            FailedPrecondition,
            "basic authentication is disabled for this instance",
        ),
        (
            {"email": None, "phone_number": PHONE},
            {"enable_mobile_basic_authentication": False},
            FailedPrecondition,
            "mobile basic authentication is disabled for this instance",
        ),
        ({"email": "ann@"}, {}, InvalidArgument, "invalid email address"),
        ({"email": None, "phone_number": "12345"}, {}, InvalidArgument, "invalid phone number"),
        ({"roles": ("admin",)}, {}, InvalidArgument, "invalid roles"),
        ({"roles": ("ghost",)}, {}, InvalidArgument, "invalid roles"),
    ],
)
def test_validation(
    changes: dict[str, object], policy: dict[str, bool], error: type, message: str
) -> None:
    machine = SignupMachine(env(**policy))
    assert machine.handle(dataclasses.replace(REQUEST, **changes)) == [  # type: ignore[arg-type]
        Fail(error=error, message=message)
    ]
    assert machine.state is State.FAILED


def test_weak_password_is_fine_without_strong_password_policy() -> None:
    request = dataclasses.replace(REQUEST, password="abcdefg", confirm_password="abcdefg")
    assert SignupMachine(env(enable_strong_password=False)).handle(request) == [
        HashPassword(password="abcdefg")
    ]


def test_requested_allowed_roles_are_granted() -> None:
    machine = SignupMachine(env())
    effects = last(
        machine,
        dataclasses.replace(REQUEST, roles=("editor", "user")),
        PasswordHashed(password_hash="h"),
        TokensIssued(tokens=tokens()),
    )
    assert isinstance(effects[-1], CreateUser)
    assert effects[-1].user.roles == ("editor", "user")
