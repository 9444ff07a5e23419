"""Response values render the wire dictionaries of the reference."""

from __future__ import annotations

import pytest

from bastion.core.auth.responses import (
    AuthResponse,
    ForgotPasswordResponse,
    IssuedTokens,
    MessageResponse,
    TokenResponse,
)
from bastion.core.auth.user import User

USER = User(id="u1", email="a@b.io", roles=("user",))
TOKENS = IssuedTokens(
    nonce="n",
    access_token="at",
    id_token="it",
    refresh_token="rt",
    session_token="st",
    expires_in=1800,
)


def test_auth_response_always_emits_every_field() -> None:
    body = AuthResponse.with_tokens("Logged in successfully", USER, TOKENS).to_api_dict()
    assert body == {
        "message": "Logged in successfully",
        "should_show_email_otp_screen": False,
        "should_show_mobile_otp_screen": False,
        "should_show_totp_screen": False,
        "should_offer_email_otp_mfa_setup": False,
        "should_offer_sms_otp_mfa_setup": False,
        "should_offer_webauthn_mfa_verify": False,
        "access_token": "at",
        "id_token": "it",
        "refresh_token": "rt",
        "expires_in": 1800,
        "user": USER.to_api_dict(),
    }
    assert "at" not in repr(AuthResponse.with_tokens("m", USER, TOKENS)).split("message")[0]


def test_signup_style_response_leaves_out_the_id_token() -> None:
    body = AuthResponse.with_tokens("m", USER, TOKENS, include_id_token=False).to_api_dict()
    assert body["id_token"] is None
    assert body["access_token"] == "at"


def test_message_only_responses() -> None:
    assert AuthResponse(message="m").to_api_dict()["user"] is None
    assert MessageResponse(message="Token revoked").to_api_dict() == {"message": "Token revoked"}
    assert ForgotPasswordResponse(message="m").to_api_dict() == {
        "message": "m",
        "should_show_mobile_otp_screen": False,
    }


def test_token_response_omits_a_missing_refresh_token() -> None:
    body = TokenResponse(
        access_token="at", id_token="it", scope=("openid", "email"), roles=("user",), expires_in=5
    ).to_api_dict()
    assert body == {
        "access_token": "at",
        "token_type": "Bearer",
        "id_token": "it",
        "scope": "openid email",
        "roles": ["user"],
        "expires_in": 5,
    }


@pytest.mark.parametrize(
    "changes",
    [{"nonce": ""}, {"access_token": ""}, {"session_token": ""}, {"expires_in": 0}],
)
def test_issued_tokens_are_complete(changes: dict[str, object]) -> None:
    base: dict[str, object] = {
        "nonce": "n",
        "access_token": "at",
        "id_token": "it",
        "session_token": "st",
        "expires_in": 1,
    }
    with pytest.raises(ValueError):  # noqa: PT011
        IssuedTokens(**{**base, **changes})  # type: ignore[arg-type]
