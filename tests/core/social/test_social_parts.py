"""The pure parts of social login: providers, profiles, the pending login, ID-token and
Apple-secret checks."""

from __future__ import annotations

import pytest

from bastion.core.social import profile as p
from bastion.core.social.apple import AppleSigningKey, parse_apple_secret
from bastion.core.social.id_token import CLOCK_SKEW, id_token_problem
from bastion.core.social.pending import PendingLogin, binding_digest, binding_matches
from bastion.core.social.providers import (
    MICROSOFT_CONSUMER_TENANT,
    SPECS,
    Provider,
    parse_provider_urls,
)

NOW = 1_700_000_000


def test_every_provider_is_described() -> None:
    assert set(SPECS) == set(Provider)
    assert SPECS[Provider.TWITTER].pkce
    assert SPECS[Provider.APPLE].response_mode == "form_post"
    ms = SPECS[Provider.MICROSOFT]
    assert ms.token.url(None, tenant="contoso") == (
        "https://login.microsoftonline.com/contoso/oauth2/v2.0/token"
    )
    assert ms.token.url("http://127.0.0.1:9", tenant="common") == (
        "http://127.0.0.1:9/common/oauth2/v2.0/token"
    )


def test_provider_urls() -> None:
    assert parse_provider_urls(("GitHub=http://127.0.0.1:9/",)) == {
        Provider.GITHUB: "http://127.0.0.1:9"
    }
    for bad in ("github", "nobody=http://x", "github=file:///etc", "github=http://x/?a=1"):
        with pytest.raises(ValueError, match=r"expected|http"):
            parse_provider_urls((bad,))


# -- profiles --------------------------------------------------------------------------------


def test_oidc_claims_and_apple_strings() -> None:
    profile = p.from_oidc(
        {"sub": "1", "email": "A@X.io", "email_verified": "true", "name": "Ann B"}
    )
    assert profile.verified_email == "a@x.io"
    assert (profile.given_name, profile.family_name) == ("Ann", "B")
    assert (
        p.from_oidc({"sub": "1", "email": "a@x.io", "email_verified": "false"}).verified_email
        is None
    )
    apple = p.from_apple(
        {"sub": "1", "email": "a@x.io", "email_verified": True},
        {"name": {"firstName": "Ann", "lastName": "Bee"}},
    )
    assert (apple.given_name, apple.family_name, apple.verified_email) == ("Ann", "Bee", "a@x.io")


def test_microsoft_addresses_are_verified_only_where_microsoft_vouches() -> None:
    claims = {"sub": "1", "email": "a@x.io", "email_verified": True, "tid": "some-org"}
    assert p.from_microsoft(claims).verified_email is None
    assert p.from_microsoft({**claims, "xms_edov": True}).verified_email == "a@x.io"
    assert p.from_microsoft({**claims, "tid": MICROSOFT_CONSUMER_TENANT}).verified_email == "a@x.io"


def test_github_uses_the_verified_primary_address_only() -> None:
    user = {"id": 7, "login": "ann", "name": "Ann Bee", "email": "public@x.io"}
    emails = [
        {"email": "other@x.io", "primary": False, "verified": True},
        {"email": "main@x.io", "primary": True, "verified": True},
    ]
    profile = p.from_github(user, emails)
    assert (profile.subject, profile.verified_email, profile.nickname) == ("7", "main@x.io", "ann")
    emails[1]["verified"] = False
    assert p.from_github(user, emails).verified_email is None
    assert p.from_github(user, []).verified_email is None


def test_api_profiles() -> None:
    fb = p.from_facebook({"id": "5", "email": "a@x.io", "picture": {"data": {"url": "u"}}})
    assert (fb.verified_email, fb.picture) == ("a@x.io", "u")
    discord = p.from_discord({"id": "9", "email": "a@x.io", "verified": False, "avatar": "h"})
    assert discord.verified_email is None
    assert discord.picture == "https://cdn.discordapp.com/avatars/9/h.png"
    x = p.from_twitter({"data": {"id": "3", "name": "Ann", "confirmed_email": "a@x.io"}})
    assert x.verified_email == "a@x.io"
    assert p.from_twitter({"data": {"id": "3"}}).verified_email is None


@pytest.mark.parametrize("data", [{}, {"sub": ""}, {"sub": True}])
def test_a_profile_needs_the_provider_user_id(data: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="user id"):
        p.from_oidc(data)


# -- the pending login ---------------------------------------------------------------------


def test_pending_login_round_trip_and_binding() -> None:
    pending = PendingLogin(
        provider=Provider.APPLE,
        redirect_uri="https://app.example.com/cb",
        app_state="s",
        roles=("user",),
        binding_digest=binding_digest("cookie-value"),
        code_verifier="v" * 43,
        nonce="n",
        created_at=NOW,
    )
    assert PendingLogin.from_json(pending.to_json()) == pending
    assert b"cookie-value" not in pending.to_json()
    assert "v" * 43 not in repr(pending)
    assert binding_matches(pending, "cookie-value")
    assert not binding_matches(pending, "other")
    assert not binding_matches(pending, None)


# -- ID tokens -------------------------------------------------------------------------------

GOOD = {
    "iss": "https://issuer",
    "aud": "cid",
    "sub": "1",
    "exp": NOW + 60,
    "iat": NOW,
    "nonce": "n",
}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({}, None),
        ({"aud": ["cid", "other"], "azp": "cid"}, None),
        ({"iss": "https://elsewhere"}, "unexpected issuer"),
        ({"aud": "other"}, "unexpected audience"),
        ({"aud": ["cid", "other"]}, "unexpected authorized party"),
        ({"exp": NOW - CLOCK_SKEW - 1}, "expired"),
        ({"iat": NOW + CLOCK_SKEW + 1}, "issued in the future"),
        ({"nonce": "m"}, "nonce mismatch"),
        ({"sub": ""}, "no subject"),
    ],
)
def test_id_token_checks(changes: dict[str, object], problem: str | None) -> None:
    claims = {**GOOD, **changes}
    found = id_token_problem(claims, issuer="https://issuer", client_id="cid", nonce="n", now=NOW)
    assert found == problem


def test_apple_secret_forms() -> None:
    key = parse_apple_secret(
        "TEAM:KEY:-----BEGIN PRIVATE KEY-----\\nabc\\n-----END PRIVATE KEY-----"
    )
    assert key == AppleSigningKey(
        team_id="TEAM",
        key_id="KEY",
        private_key_pem="-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----",
    )
    assert "abc" not in repr(key)
    assert parse_apple_secret("a.b.c") == "a.b.c"
    with pytest.raises(ValueError, match="apple-client-secret") as caught:
        parse_apple_secret("hunter2")
    assert "hunter2" not in str(caught.value)
