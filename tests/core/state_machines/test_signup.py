"""Signup: both documented happy paths, the validation order, and the taken identity."""

from __future__ import annotations

import dataclasses

import pytest

from core.auth.claims import DEFAULT_SCOPE
from core.auth.emails import EmailEvent
from core.auth.responses import AuthResponse
from core.auth.user import User
from core.errors import FailedPrecondition, InvalidArgument
from core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    CreateVerificationRequest,
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
from core.state_machines.events import (
    PasswordHashed,
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    VerificationRequestCreated,
)
from core.state_machines.signup import SignupMachine, SignupRequested, State
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


def test_happy_path_issues_tokens_without_an_id_token() -> None:
    machine, created, issued = SignupMachine(env()), new_user(), tokens()
    steps = drive(
        machine,
        REQUEST,
        PasswordHashed(password_hash="$argon2id$new"),
        UserCreated(user=created),
        TokensIssued(tokens=issued),
    )
    audit = AuditRecord(
        action=AuditAction.SIGNUP, actor_id="id-1", actor_email=EMAIL, resource_id="id-1"
    )
    assert steps == [
        [HashPassword(password=STRONG)],
        [CreateUser(user=created, lock_keys=("email:ann@example.com",))],
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
    effects = last(machine, REQUEST, PasswordHashed(password_hash="$argon2id$new"))
    assert isinstance(effects[0], CreateUser)
    assert effects[0].user.email_verified_at == NOW


def test_a_taken_identity_is_the_vague_signup_failure() -> None:
    machine = SignupMachine(env())
    effects = last(
        machine, REQUEST, PasswordHashed(password_hash="$argon2id$new"), UserAlreadyExists()
    )
    assert effects == [
        Fail(
            error=InvalidArgument,
            message="signup failed. please check your credentials or try a different method",
        )
    ]
    assert machine.state is State.FAILED


def test_phone_signup_records_mobile_basic_auth_but_logs_in_with_basic_auth() -> None:
    request = dataclasses.replace(REQUEST, phone_number=PHONE)
    machine = SignupMachine(env(enforce_mfa=False))
    steps = drive(machine, request, PasswordHashed(password_hash="$argon2id$new"))
    create = steps[1][0]
    assert isinstance(create, CreateUser)
    assert create.lock_keys == ("email:ann@example.com", f"phone:{PHONE}")
    assert create.user.signup_methods == ("mobile_basic_auth",)
    assert create.user.phone_number_verified_at == NOW
    assert create.user.is_multi_factor_auth_enabled is None
    steps = drive(machine, UserCreated(user=create.user), TokensIssued(tokens=tokens()))
    issue = steps[0][0]
    assert isinstance(issue, IssueTokens)
    assert issue.login_method == "basic_auth"
    recipes = [e.auth_recipe for e in steps[1] if isinstance(e, EmitWebhook)]
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
    )
    assert isinstance(effects[0], CreateUser)
    assert effects[0].user.roles == ("editor", "user")
