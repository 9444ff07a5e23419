"""The OAuth 2.0 / OpenID Connect provider against a live RS256 server.

authlib's OAuth2 client runs the authorization-code + PKCE flow (after a REST login gave
the browser its session cookie); the ID token is verified against the served JWKS; the
tokens are refreshed, introspected, used at /userinfo, revoked; RP-initiated logout ends
the session and the back-channel receiver gets a signed logout token. Then the refusals:
untrusted redirect URIs (never redirected to), reused codes (and the tokens they gave
revoked), wrong verifiers, a public client without PKCE, implicit tokens only when asked
and never in a query, prompt=none without a session, and the login-page hand-off with a
state bound by a login.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import authlib.deprecate  # noqa: F401  (installs its own "always" filter, overridden below)
import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet

from tests.dbfixtures import fresh_sqlite_url
from tests.keys import rsa_pem_pair
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    CLIENT_SECRET,
    ServerProcess,
    base_flags,
    running,
)
from tests.server.test_auth_flows import client_for, login, session_cookie, signup, unique_email
from tests.webhook_receiver import Receiver, receiver

with warnings.catch_warnings():
    # authlib 1.7+ announces an httpx2 migration on import; the client itself is current.
    warnings.simplefilter("ignore")
    from authlib.integrations.httpx_client import OAuth2Client

RP = "https://rp.example.com"
REDIRECT = f"{RP}/callback"


def rsa_flags() -> list[str]:
    private, public = rsa_pem_pair()
    return ["--jwt-type=RS256", f"--jwt-private-key={private}", f"--jwt-public-key={public}"]


@dataclass
class Provider:
    server: ServerProcess
    hook: Receiver

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    tmp = tmp_path_factory.mktemp("oauth")
    with receiver() as hook:
        flags = [
            *(f for f in base_flags("sqlite", fresh_sqlite_url(tmp)) if not f.startswith("--jwt-")),
            *rsa_flags(),
            "--app-cookie-secure=false",
            f"--allowed-origins={RP}",
            f"--backchannel-logout-uri={hook.url}",
        ]
        with running(flags, tmp) as server:
            yield Provider(server, hook)


@pytest.fixture
def browser(provider: Provider) -> Iterator[httpx.Client]:
    with client_for(provider.server) as client:
        yield client


def logged_in(browser: httpx.Client) -> tuple[str, str]:
    """A new user logged in through REST: (email, session cookie value)."""
    email = unique_email("oauth")
    assert signup(browser, email).status_code == 200
    response = login(browser, email)
    assert response.status_code == 200, response.text
    return email, session_cookie(response)


def cookie(value: str) -> dict[str, str]:
    return {"cookie": f"cookie_session={value}"}


def authorize(browser: httpx.Client, session: str | None, **params: str) -> httpx.Response:
    query = {
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "state": secrets.token_urlsafe(8),
        **params,
    }
    return browser.get("/authorize", params=query, headers=cookie(session) if session else {})


def location(response: httpx.Response) -> tuple[str, dict[str, str], dict[str, str]]:
    """(URL without query/fragment, query params, fragment params) of a redirect."""
    assert response.status_code == 302, response.text
    parts = urlsplit(response.headers["location"])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    fragment = {k: v[0] for k, v in parse_qs(parts.fragment).items()}
    return f"{parts.scheme}://{parts.netloc}{parts.path}", query, fragment


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def oauth_client(provider: Provider, **kwargs: Any) -> OAuth2Client:
    return OAuth2Client(
        client_id=CLIENT_ID,
        redirect_uri=REDIRECT,
        scope="openid profile email offline_access",
        code_challenge_method="S256",
        base_url=provider.url,
        **kwargs,
    )


def verified_id_token(provider: Provider, id_token: str) -> dict[str, Any]:
    keys = httpx.get(f"{provider.url}/.well-known/jwks.json").json()
    token = jwt.decode(id_token, KeySet.import_key_set(keys), algorithms=["RS256"])
    return dict(token.claims)


@dataclass
class PkceCode:
    """A code a new, logged-in user's browser got with a PKCE challenge."""

    email: str
    session: str
    code: str
    verifier: str


def pkce_code(provider: Provider, browser: httpx.Client) -> PkceCode:
    email, session = logged_in(browser)
    verifier, challenge = pkce()
    code = code_for(provider, browser, session, code_challenge=challenge)
    return PkceCode(email, session, code, verifier)


def code_for(provider: Provider, browser: httpx.Client, session: str, **params: str) -> str:
    response = authorize(browser, session, response_type="code", **params)
    target, query, _ = location(response)
    assert target == REDIRECT
    return query["code"]


# -- the whole flow, driven by authlib's client ----------------------------------------------------


def test_code_flow_with_pkce_by_authlib_client_then_refresh_introspect_userinfo_revoke(
    provider: Provider, browser: httpx.Client
) -> None:
    email, session = logged_in(browser)
    nonce = secrets.token_urlsafe(12)
    verifier = secrets.token_urlsafe(48)
    with oauth_client(provider, token_endpoint_auth_method="none") as client:
        url, state = client.create_authorization_url(
            f"{provider.url}/authorize", code_verifier=verifier, nonce=nonce
        )
        # the browser, with its session cookie, follows the authorization URL
        answer = browser.get(url, headers=cookie(session))
        target, query, _ = location(answer)
        assert target == REDIRECT
        assert query["state"] == state
        token = client.fetch_token(
            f"{provider.url}/oauth/token",
            authorization_response=answer.headers["location"],
            code_verifier=verifier,
        )
        assert token["token_type"] == "Bearer"
        assert set(token["scope"].split()) == {"openid", "profile", "email", "offline_access"}
        assert token["refresh_token"]

        claims = verified_id_token(provider, token["id_token"])
        assert claims["iss"] == provider.url
        assert claims["aud"] == CLIENT_ID
        assert claims["nonce"] == nonce
        assert claims["email"] == email
        assert claims["token_type"] == "id_token"
        assert claims["auth_time"] <= claims["iat"]

        info = client.get("/userinfo")
        assert info.status_code == 200
        assert info.json()["email"] == email
        assert info.json()["sub"] == claims["sub"]
        assert "roles" not in info.json()

        introspected = client.introspect_token(
            f"{provider.url}/oauth/introspect",
            token=token["access_token"],
            auth=(CLIENT_ID, CLIENT_SECRET),
        ).json()
        assert introspected["active"] is True
        assert introspected["sub"] == claims["sub"]
        assert introspected["client_id"] == CLIENT_ID
        assert introspected["token_type"] == "access_token"

        refreshed = client.refresh_token(
            f"{provider.url}/oauth/token", refresh_token=token["refresh_token"]
        )
        assert refreshed["access_token"] != token["access_token"]
        old = client.introspect_token(
            f"{provider.url}/oauth/introspect",
            token=token["access_token"],
            auth=(CLIENT_ID, CLIENT_SECRET),
        )
        assert old.json() == {"active": False}  # rotation ended the first session

        revoked = client.revoke_token(
            f"{provider.url}/oauth/revoke", token=refreshed["refresh_token"]
        )
        assert revoked.status_code == 200
        after = client.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": refreshed["refresh_token"],
                "client_id": CLIENT_ID,
            },
        )
        assert after.status_code == 400
        assert after.json()["error"] == "invalid_grant"


def test_a_confidential_client_authenticates_with_basic_or_post(
    provider: Provider, browser: httpx.Client
) -> None:
    _, session = logged_in(browser)
    for method in ("client_secret_basic", "client_secret_post"):
        code = code_for(provider, browser, session)
        with OAuth2Client(
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            token_endpoint_auth_method=method,
            redirect_uri=REDIRECT,
        ) as client:
            token = client.fetch_token(f"{provider.url}/oauth/token", code=code)
        assert token["access_token"]
        assert "refresh_token" not in token  # no offline_access asked
    code = code_for(provider, browser, session)
    wrong = httpx.post(
        f"{provider.url}/oauth/token",
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT},
        auth=(CLIENT_ID, "not-the-secret"),
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"
    assert wrong.headers["www-authenticate"].startswith("Basic")


# -- refusals at the token endpoint ----------------------------------------------------------------


def redeem(provider: Provider, code: str, **extra: str) -> httpx.Response:
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        **extra,
    }
    return httpx.post(f"{provider.url}/oauth/token", data=body)


def test_a_reused_code_is_refused_and_revokes_the_tokens_it_gave(
    provider: Provider, browser: httpx.Client
) -> None:
    got = pkce_code(provider, browser)
    first = redeem(provider, got.code, code_verifier=got.verifier)
    assert first.status_code == 200
    access = first.json()["access_token"]
    userinfo = f"{provider.url}/userinfo"
    assert httpx.get(userinfo, headers={"authorization": f"Bearer {access}"}).status_code == 200
    second = redeem(provider, got.code, code_verifier=got.verifier)
    assert second.status_code == 400
    assert second.json() == {
        "error": "invalid_grant",
        "error_description": "The authorization code is invalid or has expired",
    }
    gone = httpx.get(userinfo, headers={"authorization": f"Bearer {access}"})
    assert gone.status_code == 401
    assert gone.json()["error"] == "invalid_token"
    assert 'error="invalid_token"' in gone.headers["www-authenticate"]


def test_a_redeemed_code_leaves_a_session_created_audit_row(
    provider: Provider, browser: httpx.Client
) -> None:
    got = pkce_code(provider, browser)
    assert redeem(provider, got.code, code_verifier=got.verifier).status_code == 200
    listed = httpx.post(
        f"{provider.url}/v1/admin/audit_logs",
        json={"action": "session.created"},
        headers={"x-service-admin-secret": ADMIN_SECRET, "origin": provider.url},
    )
    assert listed.status_code == 200, listed.text
    mine = [row for row in listed.json()["audit_logs"] if row["actor_email"] == got.email]
    assert len(mine) == 1
    assert json.loads(mine[0]["metadata"]) == {
        "client_id": CLIENT_ID,
        "grant_type": "authorization_code",
        "protocol": "rest",
    }


def test_a_code_dies_with_the_sessions_ended_after_it_was_given(
    provider: Provider, browser: httpx.Client
) -> None:
    """An email change ends the user's sessions (the SQL marker): a code its session got
    before is refused, as the session's own tokens are."""
    got = pkce_code(provider, browser)
    # The marker has one-second resolution and a session begun in its second stands.
    time.sleep(1.1)
    changed = browser.post(
        "/v1/update_profile",
        json={"email": unique_email("oauth-moved")},
        headers=cookie(got.session),
    )
    assert changed.status_code == 200, changed.text
    refused = redeem(provider, got.code, code_verifier=got.verifier)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"


def test_of_concurrent_redemptions_of_one_code_exactly_one_succeeds(
    provider: Provider, browser: httpx.Client
) -> None:
    got = pkce_code(provider, browser)
    start = threading.Barrier(6)
    statuses: list[int] = []

    def attempt() -> None:
        start.wait()
        statuses.append(redeem(provider, got.code, code_verifier=got.verifier).status_code)

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [200, 400, 400, 400, 400, 400]


def test_wrong_verifier_missing_pkce_and_other_redirect_are_refused(
    provider: Provider, browser: httpx.Client
) -> None:
    _, session = logged_in(browser)
    verifier, challenge = pkce()
    cases = [
        ({"code_verifier": pkce()[0]}, "invalid_grant"),
        ({}, "invalid_request"),  # no verifier for a code with a challenge
        ({"code_verifier": verifier, "redirect_uri": f"{RP}/elsewhere"}, "invalid_grant"),
    ]
    for extra, error in cases:
        code = code_for(provider, browser, session, code_challenge=challenge)
        response = redeem(provider, code, **extra)
        assert (response.status_code, response.json()["error"]) == (400, error), extra
        # a refused redemption consumed the code: the right verifier is too late now
        assert redeem(provider, code, code_verifier=verifier).status_code == 400
    # a public client (no secret) must use PKCE
    code = code_for(provider, browser, session)
    public = redeem(provider, code)
    assert (public.status_code, public.json()["error"]) == (400, "invalid_client")
    unknown = redeem(provider, "no-such-code", code_verifier=verifier)
    assert unknown.json()["error"] == "invalid_grant"
    unsupported = httpx.post(
        f"{provider.url}/oauth/token", data={"grant_type": "password", "client_id": CLIENT_ID}
    )
    assert unsupported.json()["error"] == "unsupported_grant_type"


# -- refusals at /authorize ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "redirect_uri",
    [
        "https://evil.example.net/callback",
        "https://rp.example.com.evil.net/callback",
        "javascript:alert(1)",
        f"{RP}/callback#fragment",
        "",
    ],
)
def test_untrusted_redirect_uris_get_a_plain_400_never_a_redirect(
    provider: Provider, browser: httpx.Client, redirect_uri: str
) -> None:
    _, session = logged_in(browser)
    response = authorize(browser, session, response_type="code", redirect_uri=redirect_uri)
    assert response.status_code == 400
    assert "location" not in response.headers
    assert response.json()["error"] == "invalid_request"


def test_unknown_client_gets_a_plain_error(provider: Provider, browser: httpx.Client) -> None:
    response = authorize(browser, None, client_id="someone-else")
    assert (response.status_code, response.json()["error"]) == (400, "invalid_client")


def test_implicit_tokens_only_when_asked_and_never_in_a_query(
    provider: Provider, browser: httpx.Client
) -> None:
    _, session = logged_in(browser)
    # the default response type is code
    _, query, fragment = location(authorize(browser, session))
    assert set(query) == {"code", "state"}
    assert fragment == {}
    nonce = secrets.token_urlsafe(8)
    answer = authorize(browser, session, response_type="id_token token", nonce=nonce)
    target, query, fragment = location(answer)
    assert (target, query) == (REDIRECT, {})
    assert fragment["token_type"] == "Bearer"
    claims = verified_id_token(provider, fragment["id_token"])
    assert claims["nonce"] == nonce
    assert "at_hash" in claims
    userinfo = httpx.get(
        f"{provider.url}/userinfo", headers={"authorization": f"Bearer {fragment['access_token']}"}
    )
    assert userinfo.status_code == 200
    refused = authorize(browser, session, response_type="token", response_mode="query")
    _, query, _ = location(refused)
    assert query["error"] == "invalid_request"
    assert "access_token" not in query


def test_state_is_required(provider: Provider, browser: httpx.Client) -> None:
    _, session = logged_in(browser)
    response = browser.get(
        "/authorize",
        params={"client_id": CLIENT_ID, "redirect_uri": REDIRECT},
        headers=cookie(session),
    )
    _, query, _ = location(response)
    assert query == {"error": "invalid_request", "error_description": "state parameter is required"}


def test_prompt_none_without_a_session_is_login_required(
    provider: Provider, browser: httpx.Client
) -> None:
    response = authorize(browser, None, prompt="none", state="s-1")
    target, query, _ = location(response)
    assert target == REDIRECT
    assert query == {
        "error": "login_required",
        "error_description": "login required",
        "state": "s-1",
    }


def test_a_demanded_login_sends_a_signed_in_browser_back_to_the_login_page(
    provider: Provider, browser: httpx.Client
) -> None:
    """prompt=login, or a max_age the session outlived: the user must log in again (the
    login page; with prompt=none, login_required); a max_age still met gives the code."""
    _, session = logged_in(browser)
    time.sleep(1.1)  # the session is now more than a second old
    for demand in ({"prompt": "login"}, {"max_age": "0"}):
        target, query, _ = location(authorize(browser, session, response_type="code", **demand))
        assert target == f"{provider.url}/app", demand
        assert query["auth_after"]
        silent = {**demand, "prompt": "none login"}
        _, query, _ = location(authorize(browser, session, response_type="code", **silent))
        assert query["error"] == "login_required", demand
    _, query, _ = location(authorize(browser, session, response_type="code", max_age="3600"))
    assert "code" in query


def test_form_post_and_web_message_pages_carry_their_own_policy(
    provider: Provider, browser: httpx.Client
) -> None:
    _, session = logged_in(browser)
    page = authorize(browser, session, response_mode="form_post", state="s-2")
    assert page.status_code == 200
    assert f'action="{REDIRECT}"' in page.text
    assert 'name="state" value="s-2"' in page.text
    csp = page.headers["content-security-policy"]
    assert f"form-action {RP}" in csp
    assert "script-src 'nonce-" in csp
    message = authorize(browser, session, response_mode="web_message", state="s-3")
    assert '"authorization_response"' in message.text
    assert f"frame-ancestors {RP}" in message.headers["content-security-policy"]


# -- the login page hand-off -----------------------------------------------------------------------


def test_no_session_goes_to_the_login_page_and_a_login_with_the_state_binds_the_code(
    provider: Provider, browser: httpx.Client
) -> None:
    verifier, challenge = pkce()
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    first = authorize(
        browser, None, response_type="code", state=state, nonce=nonce, code_challenge=challenge
    )
    target, query, _ = location(first)
    assert target == f"{provider.url}/app"
    assert (query["state"], query["nonce"], query["redirect_uri"]) == (state, nonce, REDIRECT)
    announced = query["code"]
    signup_page = authorize(browser, None, state=secrets.token_urlsafe(8), screen_hint="signup")
    assert location(signup_page)[0] == f"{provider.url}/app/signup"
    # Authorizer's login app: log in with the state, then send the announced code
    email = unique_email("bind")
    assert signup(browser, email).status_code == 200
    logged = login(browser, email, state=state)
    assert logged.status_code == 200
    assert verified_id_token(provider, logged.json()["id_token"])["nonce"] == nonce
    token = redeem(provider, announced, code_verifier=verifier)
    assert token.status_code == 200, token.text
    assert verified_id_token(provider, token.json()["id_token"])["email"] == email
    # our login page instead sends the browser back to /authorize: same state, now a session
    again = authorize(
        browser,
        session_cookie(logged),
        response_type="code",
        state=state,
        nonce=nonce,
        code_challenge=challenge,
    )
    _, query, _ = location(again)
    assert query["state"] == state
    assert redeem(provider, query["code"], code_verifier=verifier).status_code == 200


# -- discovery and logout --------------------------------------------------------------------------


def test_discovery_lists_what_is_served(provider: Provider) -> None:
    doc = httpx.get(f"{provider.url}/.well-known/openid-configuration").json()
    assert doc["issuer"] == provider.url
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token", "implicit"]
    assert doc["id_token_signing_alg_values_supported"] == ["RS256"]
    assert doc["backchannel_logout_supported"] is True
    paths = {
        name: urlsplit(doc[f"{name}_endpoint"]).path
        for name in ("authorization", "token", "userinfo", "introspection", "end_session")
    }
    assert paths == {
        "authorization": "/authorize",
        "token": "/oauth/token",
        "userinfo": "/userinfo",
        "introspection": "/oauth/introspect",
        "end_session": "/logout",
    }
    assert "token" in doc["response_types_supported"]
    (key,) = httpx.get(doc["jwks_uri"]).json()["keys"]
    assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")


def test_introspection_needs_client_authentication(provider: Provider) -> None:
    anonymous = httpx.post(f"{provider.url}/oauth/introspect", data={"token": "x"})
    assert (anonymous.status_code, anonymous.json()["error"]) == (400, "invalid_client")
    junk = httpx.post(
        f"{provider.url}/oauth/introspect", data={"token": "x"}, auth=(CLIENT_ID, CLIENT_SECRET)
    )
    assert junk.json() == {"active": False}


def test_rp_initiated_logout_ends_the_session_and_notifies_the_back_channel(
    provider: Provider, browser: httpx.Client
) -> None:
    got = pkce_code(provider, browser)
    id_token = redeem(provider, got.code, code_verifier=got.verifier).json()["id_token"]
    sub = verified_id_token(provider, id_token)["sub"]
    before = len(provider.hook.received)
    response = browser.get(
        "/logout",
        params={
            "id_token_hint": id_token,
            "post_logout_redirect_uri": f"{RP}/bye",
            "state": "s-9",
        },
        headers=cookie(got.session),
    )
    assert response.status_code == 302
    assert response.headers["location"] == f"{RP}/bye?state=s-9"
    cleared = [h for h in response.headers.get_list("set-cookie") if "cookie_session=" in h]
    assert cleared
    assert all("Max-Age=0" in h for h in cleared)
    profile = browser.get("/v1/profile", headers=cookie(got.session))
    assert profile.status_code == 401
    (notice,) = provider.hook.wait_for(before + 1)[before:]
    logout_token = parse_qs(notice.body.decode())["logout_token"][0]
    claims = verified_id_token(provider, logout_token)
    assert claims["sub"] == sub
    assert claims["aud"] == CLIENT_ID
    assert "http://schemas.openid.net/event/backchannel-logout" in claims["events"]
    assert "nonce" not in claims


def test_logout_without_a_hint_asks_first_and_refuses_foreign_targets(
    provider: Provider, browser: httpx.Client
) -> None:
    _, session = logged_in(browser)
    page = browser.get("/logout", headers=cookie(session))
    assert page.status_code == 200
    assert '<form method="post" action="/logout">' in page.text
    assert browser.get("/v1/profile", headers=cookie(session)).status_code == 200
    foreign = browser.post(
        "/logout", headers={**cookie(session), "origin": "https://evil.example.net"}
    )
    assert foreign.status_code == 200  # only the confirmation page again
    assert browser.get("/v1/profile", headers=cookie(session)).status_code == 200
    bad_target = browser.post(
        "/logout",
        data={"post_logout_redirect_uri": "https://evil.example.net/"},
        headers=cookie(session),
    )
    assert (bad_target.status_code, bad_target.json()["error"]) == (400, "invalid_request")
    confirmed = browser.post("/logout", headers=cookie(session))
    assert confirmed.status_code == 200
    assert "You are logged out" in confirmed.text
    assert browser.get("/v1/profile", headers=cookie(session)).status_code == 401
