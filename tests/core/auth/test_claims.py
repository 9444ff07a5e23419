"""Token claims as the reference gives them (§5.2)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from typing import Any

import pytest

from bastion.core.auth.claims import (
    RESERVED_CLAIMS,
    access_token_claims,
    amr_for,
    claims_are_valid,
    expires_in,
    id_token_claims,
    left_half_hash,
    link_request,
    login_method_for,
    merge_custom_claims,
    refresh_token_claims,
    session_claims,
    verification_token_claims,
    wants_refresh_token,
)
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.user import SignupMethod, User
from bastion.core.auth.verification import VerificationRequest

NOW = 1_700_000_000
POLICY = AuthPolicy(url="https://auth.example.com/", client_id="cid", jwt_role_claim="role")
USER = User(
    id="u1",
    email="ann@example.com",
    email_verified_at=NOW - 5,
    given_name="Ann",
    signup_methods=("basic_auth",),
    roles=("user", "editor"),
    created_at=NOW - 10,
    updated_at=NOW - 10,
    password_hash="secret-hash",
    app_data={"plan": "pro"},
)
COMMON = {"policy": POLICY, "user": USER, "roles": ("user",), "login_method": "basic_auth"}


def test_access_token() -> None:
    claims = access_token_claims(**COMMON, scope=("openid",), nonce="n1", now=NOW)  # type: ignore[arg-type]
    assert claims == {
        "iss": "https://auth.example.com",
        "aud": "cid",
        "sub": "u1",
        "iat": NOW,
        "exp": NOW + 1800,
        "token_type": "access_token",
        "nonce": "n1",
        "roles": ["user"],
        "allowed_roles": ["user", "editor"],
        "scope": ["openid"],
        "login_method": "basic_auth",
    }


def test_refresh_token_lives_as_configured() -> None:
    claims = refresh_token_claims(**COMMON, scope=("offline_access",), nonce="n1", now=NOW)  # type: ignore[arg-type]
    assert claims["token_type"] == "refresh_token"
    assert claims["exp"] == NOW + 2_592_000
    assert claims["roles"] == ["user"]
    assert claims["auth_time"] == NOW
    kept = refresh_token_claims(**COMMON, scope=(), nonce="n2", now=NOW + 9, auth_time=NOW)  # type: ignore[arg-type]
    assert (kept["iat"], kept["auth_time"]) == (NOW + 9, NOW)


def test_id_token_embeds_the_profile_and_puts_roles_under_the_role_claim() -> None:
    claims = id_token_claims(**COMMON, nonce="n1", now=NOW, access_token="at", alg="HS256")  # type: ignore[arg-type]
    assert claims["role"] == ["user"]
    assert "roles" not in claims
    assert claims["allowed_roles"] == ["user", "editor"]
    assert claims["given_name"] == "Ann"
    assert claims["email_verified"] is True
    assert claims["preferred_username"] == "ann@example.com"
    assert claims["app_data"] == {"plan": "pro"}
    assert "password_hash" not in claims
    assert "secret-hash" not in repr(claims)
    assert (claims["sub"], claims["aud"], claims["token_type"]) == ("u1", "cid", "id_token")
    assert (claims["amr"], claims["acr"], claims["auth_time"]) == (["pwd"], "0", NOW)
    digest = hashlib.sha256(b"at").digest()[:16]
    assert claims["at_hash"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert "c_hash" not in claims


def test_id_token_prefers_the_oidc_nonce_and_hashes_a_code() -> None:
    claims = id_token_claims(
        **COMMON,  # type: ignore[arg-type]
        nonce="session",
        now=NOW,
        access_token="at",
        alg="RS512",
        oidc_nonce="oidc",
        code="the-code",
        auth_time=NOW - 60,
    )
    assert claims["nonce"] == "oidc"
    assert claims["auth_time"] == NOW - 60
    assert claims["c_hash"] == left_half_hash("the-code", "RS512")
    assert len(base64.urlsafe_b64decode(claims["c_hash"] + "==")) == 32


def test_left_half_hash_refuses_unknown_algorithms() -> None:
    with pytest.raises(ValueError, match="unsupported alg"):
        left_half_hash("x", "none")


def test_verification_token_has_the_email_as_subject() -> None:
    claims = verification_token_claims(
        policy=POLICY, email="ann@example.com", identifier="forgot_password", nonce="vn",
        redirect_uri="https://app/x", now=NOW,
    )  # fmt: skip
    assert claims["sub"] == "ann@example.com"
    assert claims["token_type"] == "forgot_password"
    assert claims["redirect_uri"] == "https://app/x"
    assert claims_are_valid(
        claims, policy=POLICY, token_type="forgot_password", now=NOW + 1,
        subject="ann@example.com", nonce="vn",
    )  # fmt: skip


def test_link_request_matches_the_stored_request_to_its_token() -> None:
    request = VerificationRequest(
        id="r1", identifier="forgot_password", email="ann@example.com", nonce="vn",
        redirect_uri="https://app/x", expires_at=NOW + 1800,
    )  # fmt: skip
    claims = verification_token_claims(
        policy=POLICY, email="ann@example.com", identifier="forgot_password", nonce="vn",
        redirect_uri="https://app/x", now=NOW,
    )  # fmt: skip

    def found(**changes: Any) -> VerificationRequest | None:
        args: dict[str, Any] = {
            "request": request, "claims": claims, "purposes": {"forgot_password"},
            "policy": POLICY, "now": NOW + 1, **changes,
        }  # fmt: skip
        return link_request(**args)

    assert found() is request
    assert found(purposes={"basic_auth_signup"}) is None  # a link for another purpose
    assert found(claims=None) is None  # forged or unreadable token
    assert found(request=None) is None  # used or replaced already
    assert found(request=dataclasses.replace(request, nonce="other")) is None
    assert found(request=dataclasses.replace(request, email="eve@example.com")) is None
    assert found(now=claims["exp"]) is None  # expired


@pytest.mark.parametrize(
    ("change", "kwargs"),
    [
        ({"iss": "https://evil"}, {}),
        ({"aud": "other"}, {}),
        ({"token_type": "access_token"}, {}),
        ({"exp": NOW + 1}, {}),
        ({"exp": "later"}, {}),
        ({"exp": True}, {}),
        ({}, {"subject": "eve"}),
        ({}, {"nonce": "other"}),
    ],
)
def test_claims_validation_rejects(change: dict[str, object], kwargs: dict[str, str]) -> None:
    claims = {**refresh_token_claims(**COMMON, scope=(), nonce="n", now=NOW), **change}  # type: ignore[arg-type]
    assert not claims_are_valid(
        claims, policy=POLICY, token_type="refresh_token", now=NOW + 1, **kwargs
    )


def test_custom_claims_never_override_reserved_ones() -> None:
    base = access_token_claims(**COMMON, scope=(), nonce="n", now=NOW)  # type: ignore[arg-type]
    custom = {key: "hacked" for key in RESERVED_CLAIMS} | {"role": ["admin"], "org_id": "o1"}
    merged = merge_custom_claims(base, custom, role_claim="role")
    assert merged == {**base, "org_id": "o1"}


def test_small_rules() -> None:
    assert login_method_for(SignupMethod.MOBILE_BASIC_AUTH) == "basic_auth"
    assert login_method_for(SignupMethod.MAGIC_LINK_LOGIN) == "magic_link_login"
    assert login_method_for(SignupMethod.MOBILE_OTP) == "mobile_otp"
    assert [amr_for(m) for m in ("basic_auth", "mobile_otp", "magic_link_login", "google")] == [
        ["pwd"],
        ["otp"],
        ["otp"],
        ["fed"],
    ]
    assert wants_refresh_token(("openid", "offline_access"))
    assert not wants_refresh_token(("openid",))
    assert expires_in(NOW + 30, NOW) == 30
    assert expires_in(NOW, NOW) == 1


def test_session_blob_claims() -> None:
    claims = session_claims(
        user=USER, roles=("user",), scope=("openid",), login_method="basic_auth", nonce="n",
        now=NOW,
    )  # fmt: skip
    assert claims == {
        "sub": "u1",
        "roles": ["user"],
        "scope": ["openid"],
        "nonce": "n",
        "iat": NOW,
        "exp": NOW + 86_400,
        "login_method": "basic_auth",
        "auth_time": NOW,
    }
    # A rotated session keeps the time its user authenticated.
    rotated = session_claims(
        user=USER, roles=("user",), scope=("openid",), login_method="basic_auth", nonce="m",
        now=NOW + 600, auth_time=NOW,
    )  # fmt: skip
    assert (rotated["iat"], rotated["auth_time"]) == (NOW + 600, NOW)
