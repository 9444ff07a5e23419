"""The RFC helpers: PKCE (RFC 7636), introspection (RFC 7662), UserInfo (OIDC §5.3),
authorize parameters (RFC 6749 §4.1.1) and the stored code/pending records."""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given
from hypothesis import strategies as st

from bastion.core.oauth import oidc_userinfo, rfc7636_pkce, rfc7662_introspection
from bastion.core.oauth.errors import InvalidClient, InvalidRequest, UnsupportedResponseType
from bastion.core.oauth.rfc6749_authorize import (
    AuthorizeRequest,
    ClientRefusal,
    RedirectRefusal,
    ResponseMode,
    parse_authorize,
)
from bastion.core.oauth.rfc6749_code import CodeGrant, PendingAuthorize
from tests.core.state_machines.harness import user

UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"


@given(st.text(alphabet=UNRESERVED, min_size=43, max_size=128))
def test_s256_is_base64url_sha256_and_only_the_right_verifier_matches(verifier: str) -> None:
    expected = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    challenge = rfc7636_pkce.s256(verifier)
    assert challenge == expected.rstrip(b"=").decode()
    assert rfc7636_pkce.verifier_matches(verifier, challenge, "S256")
    assert not rfc7636_pkce.verifier_matches(verifier + "x", challenge, "S256")
    assert not rfc7636_pkce.verifier_matches(verifier, challenge, "plain")
    assert not rfc7636_pkce.verifier_matches(challenge, challenge, "S256")


def test_verifier_syntax() -> None:
    assert not rfc7636_pkce.verifier_is_valid("a" * 42)
    assert not rfc7636_pkce.verifier_is_valid("a" * 129)
    assert not rfc7636_pkce.verifier_is_valid("a" * 42 + "/")
    assert rfc7636_pkce.verifier_is_valid("a" * 128)


def test_introspection_shapes() -> None:
    claims = {
        "sub": "u",
        "scope": ["openid", "email"],
        "exp": 2,
        "iat": 1,
        "aud": "c",
        "iss": "i",
        "token_type": "access_token",
        "roles": ["user"],
    }
    assert rfc7662_introspection.active_response(claims, client_id="c") == {
        "active": True,
        "client_id": "c",
        "scope": "openid email",
        "exp": 2,
        "iat": 1,
        "sub": "u",
        "aud": "c",
        "iss": "i",
        "token_type": "access_token",
    }
    assert rfc7662_introspection.INACTIVE == {"active": False}


def test_userinfo_follows_the_scope() -> None:
    ann = user(given_name="Ann", phone_number="+15550001111")
    assert oidc_userinfo.userinfo_claims(ann, ["openid"]) == {"sub": "user-1"}
    email = oidc_userinfo.userinfo_claims(ann, ["openid", "email"])
    assert email == {"sub": "user-1", "email": "ann@example.com", "email_verified": True}
    profile = oidc_userinfo.userinfo_claims(ann, ["profile"])
    assert profile["given_name"] == "Ann"
    assert "email" not in profile
    assert "roles" not in profile
    assert oidc_userinfo.userinfo_claims(ann, ["phone"])["phone_number"] == "+15550001111"


def parse(**params: str) -> AuthorizeRequest | ClientRefusal | RedirectRefusal:
    base = {"client_id": "c", "redirect_uri": "https://rp/cb", "state": "s"}
    return parse_authorize(
        {**base, **params},
        client_id="c",
        redirect_allowed=True,
        default_response_type="code",
        default_mode=ResponseMode.QUERY,
    )


def test_parse_defaults_and_normalisation() -> None:
    request = parse(scope="openid  email openid", response_type="token id_token", nonce="n")
    assert isinstance(request, AuthorizeRequest)
    assert request.scope == ("openid", "email")
    assert request.response_type == frozenset({"token", "id_token"})
    assert request.response_mode is ResponseMode.FRAGMENT
    assert request.wants_tokens
    assert not request.wants_code
    plain = parse()
    assert isinstance(plain, AuthorizeRequest)
    assert plain.scope == ("openid", "profile", "email")
    assert plain.response_mode is ResponseMode.QUERY
    assert plain.code_challenge_method is None
    implied = parse(code_challenge=rfc7636_pkce.s256("x" * 43))
    assert isinstance(implied, AuthorizeRequest)
    assert implied.code_challenge_method == "S256"


def test_parse_refusals_by_kind() -> None:
    assert parse(client_id="d") == ClientRefusal(
        error=InvalidClient, message="The client_id is invalid"
    )
    refused = parse(response_type="code code2")
    assert isinstance(refused, RedirectRefusal)
    assert refused.error is UnsupportedResponseType
    assert refused.state == "s"
    no_state = parse(state="")
    assert isinstance(no_state, RedirectRefusal)
    assert (no_state.error, no_state.state) == (InvalidRequest, None)


def test_records_round_trip_through_json_shapes() -> None:
    grant = CodeGrant(
        user_id="u",
        roles=("user",),
        scope=("openid",),
        login_method="basic_auth",
        redirect_uri="https://rp/cb",
        auth_time=5,
        nonce="n",
        code_challenge="c" * 43,
        code_challenge_method="S256",
    )
    assert CodeGrant.from_dict(grant.to_dict()) == grant
    pending = PendingAuthorize(redirect_uri="https://rp/cb", scope=("openid",), code="k")
    assert PendingAuthorize.from_dict(pending.to_dict()) == pending
