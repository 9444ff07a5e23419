"""The pieces of ``service.auth`` on their own: sealed cookies, request reading, token
minting (``sid``, custom claims) and the gRPC reply shapes."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from bastion.core.auth.claims import SESSION_TTL
from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.user import User
from bastion.core.errors import InvalidArgument
from bastion.core.settings import Settings, settings_from_flags
from bastion.core.state_machines.effects import IssueTokens
from bastion.service.auth.cookies import SessionCookies, cookie_domain_for
from bastion.service.auth.issuer import TokenIssuer
from bastion.service.auth.parts import mfa_policy_from, policy_from
from bastion.service.auth.requests import relations
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.requests import mapping, strings, text
from bastion.service.tokens import TokenSigner
from bastion.transports.grpc.auth_shapes import grpc_shaped
from tests.service.flags import REQUIRED


def settings(**extra: str) -> Settings:
    return settings_from_flags({**REQUIRED, **extra})


# -- sealed cookies ----------------------------------------------------------------------------


def test_a_sealed_cookie_opens_only_unaltered_and_under_its_own_secret() -> None:
    cookies = SessionCookies(settings())
    subject = "subject-0f5c2a9e-visible-only-when-unsealed"
    claims = {"sub": subject, "nonce": "n1", "sid": "s1", "exp": 123}
    sealed = cookies.seal(claims)
    assert cookies.open(sealed) == claims
    # Neither the text nor its bytes under the base64 wrapping show the subject.
    assert subject not in sealed
    assert subject.encode() not in base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    assert cookies.seal(claims) != sealed  # a fresh nonce every time
    flipped = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    assert cookies.open(flipped) is None
    assert cookies.open(sealed[:10]) is None
    assert cookies.open("!!!not base64!!!") is None
    other = SessionCookies(settings(**{"client-secret": "another-secret"}))
    assert other.open(sealed) is None


def test_cookie_attributes_follow_the_flags() -> None:
    cookies = SessionCookies(
        settings(**{"app-cookie-secure": "false", "app-cookie-same-site": "strict"})
    )
    host, domain = cookies.set("v", SESSION_TTL)
    assert (host.name, domain.name) == ("cookie_session", "cookie_session_domain")
    assert host.domain is None
    assert domain.domain == "localhost"
    for cookie in (host, domain):
        assert cookie.http_only
        assert not cookie.secure
        assert cookie.same_site == "Strict"
        assert cookie.max_age == SESSION_TTL
    cleared = SessionCookies(settings()).clear()
    assert all(c.max_age == 0 and c.value == "" and c.secure for c in cleared)
    # The default: Lax (no listed origin on another site).
    assert all(c.same_site == "Lax" for c in cleared)
    cross = SessionCookies(
        settings(**{"allowed-origins": "https://spa.other.io", "app-cookie-secure": "false"})
    )
    for cookie in cross.set("v", SESSION_TTL):
        assert (cookie.same_site, cookie.secure) == ("None", True)


@pytest.mark.parametrize(
    ("flags", "domain"),
    [
        ({"url": "https://auth.www.example.com"}, "example.com"),
        ({"url": "https://auth.example.com", "cookie-domain": "example.org"}, "example.org"),
        ({"url": "http://127.0.0.1:8080"}, "127.0.0.1"),
        ({"url": "http://localhost:8080"}, "localhost"),
    ],
)
def test_cookie_domain(flags: dict[str, str], domain: str) -> None:
    assert cookie_domain_for(settings(**flags)) == domain


def test_the_presented_cookie_prefers_the_host_one() -> None:
    caller = CallerContext(
        protocol=Protocol.REST,
        client_ip="127.0.0.1",
        cookies={"cookie_session_domain": "d", "cookie_session": "h"},
    )
    assert SessionCookies.presented(caller) == "h"
    only_domain = CallerContext(
        protocol=Protocol.REST, client_ip="127.0.0.1", cookies={"cookie_session_domain": "d"}
    )
    assert SessionCookies.presented(only_domain) == "d"


# -- request fields ------------------------------------------------------------------------------


def test_request_fields_read_alike_from_every_surface() -> None:
    request: dict[str, Any] = {
        "email": "a@b.co",
        "roles": ["user"],
        "app_data": {"value": {"plan": "pro"}},
        "required_relations": [{"relation": "viewer", "object": "doc:1"}],
    }
    assert text(request, "email") == "a@b.co"
    assert text(request, "missing") == ""
    assert strings(request, "roles") == ("user",)
    assert mapping(request, "app_data") == {"plan": "pro"}
    assert mapping({"app_data": {"plan": "free"}}, "app_data") == {"plan": "free"}
    assert relations(request, "required_relations") == (("viewer", "doc:1"),)
    with pytest.raises(InvalidArgument, match="email must be a string"):
        text({"email": 3}, "email")
    with pytest.raises(InvalidArgument, match="roles must be a list of strings"):
        strings({"roles": "user"}, "roles")
    with pytest.raises(InvalidArgument, match="app_data must be an object"):
        mapping({"app_data": [1]}, "app_data")
    with pytest.raises(InvalidArgument, match="relation and object"):
        relations({"required_relations": [{"relation": "viewer"}]}, "required_relations")


# -- minting -------------------------------------------------------------------------------------


def _effect(*, refresh: bool) -> IssueTokens:
    return IssueTokens(
        user=User(id="u1", email="a@b.co", roles=("user",)),
        roles=("user",),
        scope=("openid", "offline_access") if refresh else ("openid",),
        login_method="basic_auth",
        nonce="n1",
        include_refresh_token=refresh,
    )


async def test_minted_tokens_carry_the_family_and_safe_custom_claims() -> None:
    config = settings()
    signer = TokenSigner(config)
    seen: list[dict[str, Any]] = []

    async def custom(user: dict[str, Any], claims: dict[str, Any]) -> dict[str, Any]:
        seen.append(claims)
        return {"tenant": "acme", "sub": "evil", "role": ["admin"], "sid": "forged"}

    cookies = SessionCookies(config)
    issuer = TokenIssuer(policy_from(config), signer, cookies, custom)
    tokens = await issuer.mint(_effect(refresh=True), sid="family-1", now=1_000)
    access, id_claims = signer.verify(tokens.access_token), signer.verify(tokens.id_token)
    refresh = signer.verify(tokens.refresh_token or "")
    assert access["tenant"] == id_claims["tenant"] == "acme"
    assert access["sub"] == id_claims["sub"] == refresh["sub"] == "u1"
    assert access["sid"] == id_claims["sid"] == refresh["sid"] == "family-1"
    assert id_claims["role"] == ["user"]
    assert "tenant" not in refresh
    assert [c["token_type"] for c in seen] == ["access_token", "id_token"]
    session = cookies.open(tokens.session_token)
    assert session is not None
    assert (session["sid"], session["nonce"], session["sub"]) == ("family-1", "n1", "u1")
    plain = await TokenIssuer(policy_from(config), signer, cookies).mint(
        _effect(refresh=False), sid="f", now=1_000
    )
    assert plain.refresh_token is None


# -- gRPC shapes -----------------------------------------------------------------------------------


async def test_grpc_replies_wrap_app_data_and_claims() -> None:
    async def operation(request: dict[str, Any], caller: CallerContext) -> Reply:
        return Reply(request)

    shaped = grpc_shaped(operation)
    caller = CallerContext(protocol=Protocol.GRPC, client_ip="127.0.0.1")
    user = {"id": "u1", "app_data": {"a": 1}}
    assert (await shaped(user, caller)).body["app_data"] == {"value": {"a": 1}}
    nested = (await shaped({"message": "m", "user": user}, caller)).body
    assert nested["user"]["app_data"] == {"value": {"a": 1}}
    claims = (await shaped({"is_valid": True, "claims": {"sub": "u1"}}, caller)).body
    assert claims["claims"] == {"value": {"sub": "u1"}}


def test_the_mfa_policy_comes_from_the_settings() -> None:
    settings = Settings(enable_mfa=True, enable_sms_otp=True, smtp_host="mail")
    policy = mfa_policy_from(settings)
    assert policy == MfaPolicy(enable_mfa=True, enable_sms_otp=True, email_enabled=True)
    provider = {
        "sms_account_sid": "AC1",
        "sms_api_key": "SK1",
        "sms_api_secret": "s",
        "sms_sender": "+15550001111",
    }
    assert mfa_policy_from(Settings(**provider)).sms_enabled
    for name in provider:
        partial = {k: v for k, v in provider.items() if k != name}
        assert not mfa_policy_from(Settings(**partial)).sms_enabled
