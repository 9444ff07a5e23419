"""The User value, default emails, emailed links and the policy's own checks."""

from __future__ import annotations

import json

import pytest

from bastion.core.auth.emails import EmailEvent, render_default_email
from bastion.core.auth.links import (
    add_query,
    emailed_link,
    reset_password_redirect,
    verify_email_link,
)
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.user import (
    SignupMethod,
    User,
    identity_lock_key,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)

POLICY = AuthPolicy(url="https://auth.example.com", client_id="cid")
USER = User(
    id="u1",
    email="ann@example.com",
    email_verified_at=5,
    phone_number="+15551234567",
    password_hash="secret-hash",
    signup_methods=("basic_auth", "magic_link_login"),
    given_name='<script>alert("x")</script>',
    roles=("user",),
    created_at=1,
    updated_at=2,
    app_data={"plan": "pro"},
)


def test_api_dict_has_the_reference_fields_and_never_the_hash() -> None:
    body = USER.to_api_dict()
    assert set(body) == {
        "id", "email", "email_verified", "signup_methods", "given_name", "family_name",
        "middle_name", "nickname", "preferred_username", "gender", "birthdate",
        "phone_number", "phone_number_verified", "picture", "roles", "created_at",
        "updated_at", "revoked_timestamp", "is_multi_factor_auth_enabled", "app_data",
        "has_skipped_mfa_setup_at", "mfa_locked_at", "enrolled_mfa_methods",
    }  # fmt: skip
    assert body["signup_methods"] == "basic_auth,magic_link_login"
    assert (body["email_verified"], body["phone_number_verified"]) == (True, False)
    assert body["preferred_username"] == "ann@example.com"
    assert "secret-hash" not in json.dumps(body)
    assert "secret-hash" not in repr(USER)


def test_round_trip_through_plain_data() -> None:
    assert User.from_dict(json.loads(json.dumps(USER.to_dict()))) == USER
    with pytest.raises(ValueError, match="unknown user fields"):
        User.from_dict({"id": "u", "is_admin": True})


def test_user_checks_its_own_shape() -> None:
    with pytest.raises(ValueError, match="needs an id"):
        User(id="")
    with pytest.raises(TypeError, match="tuples"):
        User(id="u", roles="admin")  # type: ignore[arg-type]


def test_signup_methods_are_added_once() -> None:
    assert USER.with_signup_method(SignupMethod.BASIC_AUTH) is USER
    added = USER.with_signup_method(SignupMethod.MOBILE_OTP)
    assert added.signup_methods == ("basic_auth", "magic_link_login", "mobile_otp")


def test_identity_rules() -> None:
    assert normalise_email("  Ann@Example.COM ") == "ann@example.com"
    assert is_valid_email("a@b.io")
    assert not is_valid_email("a@b")
    assert not is_valid_email("a b@c.io")
    assert not is_valid_email("a@" + "b" * 320 + ".io")
    assert is_valid_phone_number("+1555123456")
    assert not is_valid_phone_number("123456789")
    assert identity_lock_key(email=" Ann@X.io") == "email:ann@x.io"
    assert identity_lock_key(phone_number=" +1555 ") == "phone:+1555"
    with pytest.raises(ValueError, match="email or a phone"):
        identity_lock_key()


@pytest.mark.parametrize(
    ("event", "subject"),
    [
        (EmailEvent.BASIC_AUTH_SIGNUP, "Please verify your email"),
        (EmailEvent.MAGIC_LINK_LOGIN, "Please verify your email"),
        (EmailEvent.UPDATE_EMAIL, "Please verify your email"),
        (EmailEvent.FORGOT_PASSWORD, "Reset Password"),
        (EmailEvent.INVITE_MEMBER, "Please accept the invitation"),
    ],
)
def test_link_emails_escape_every_variable(event: EmailEvent, subject: str) -> None:
    email = render_default_email(
        event,
        user=USER,
        organization_name="Acme & <Co>",
        organization_logo='https://x/logo.png" onerror="evil()',
        verification_url="https://auth.example.com/verify_email?token=a&redirect_uri=<b>",
    )
    assert email.subject == subject
    assert "<script>" not in email.html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in email.html
    assert "Acme &amp; &lt;Co&gt;" in email.html
    assert 'onerror="evil()' not in email.html
    assert (
        'href="https://auth.example.com/verify_email?token=a&amp;redirect_uri=&lt;b&gt;"'
        in email.html
    )


def test_otp_email_carries_the_code() -> None:
    email = render_default_email(
        EmailEvent.VERIFY_OTP, user=USER, organization_name="Acme", organization_logo="l",
        otp="AB<12",
    )  # fmt: skip
    assert email.subject == "OTP for your multi factor authentication"
    assert "AB&lt;12" in email.html
    with pytest.raises(ValueError, match="needs an otp"):
        render_default_email(
            EmailEvent.VERIFY_OTP, user=USER, organization_name="A", organization_logo="l"
        )
    with pytest.raises(ValueError, match="needs a verification_url"):
        render_default_email(
            EmailEvent.FORGOT_PASSWORD, user=USER, organization_name="A", organization_logo="l"
        )


def test_links_are_built_from_the_configured_url() -> None:
    assert verify_email_link(POLICY, "t.k", "https://app/x?y=1") == (
        "https://auth.example.com/verify_email?token=t.k&redirect_uri=https%3A%2F%2Fapp%2Fx%3Fy%3D1"
    )
    assert add_query("https://app/r?a=1#frag", [("token", "t"), ("empty", "")]) == (
        "https://app/r?a=1&token=t#frag"
    )
    assert add_query("https://app/r", []) == "https://app/r"
    assert emailed_link(POLICY, EmailEvent.FORGOT_PASSWORD, "t", "https://app/reset") == (
        "https://app/reset?token=t"
    )
    assert emailed_link(POLICY, EmailEvent.UPDATE_EMAIL, "t", "https://app").startswith(
        "https://auth.example.com/verify_email?token=t"
    )
    assert reset_password_redirect(POLICY, None) == "https://auth.example.com/app/reset-password"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "ftp://x", "client_id": "c"}, "url must be http"),
        ({"url": "https://x", "client_id": ""}, "client_id is required"),
        ({"url": "https://x", "client_id": "c", "access_token_ttl": 0}, "positive"),
    ],
)
def test_policy_checks(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuthPolicy(**kwargs)  # type: ignore[arg-type]


def test_verification_needs_mail() -> None:
    on = AuthPolicy(url="https://x", client_id="c", enable_email_verification=True)
    assert not on.verification_possible
    mailed = AuthPolicy(
        url="https://x", client_id="c", enable_email_verification=True, email_enabled=True
    )
    assert mailed.verification_possible
