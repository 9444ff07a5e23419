"""The OAuth 2.0 / OpenID Connect provider: discovery and JWKS, the code flow with PKCE
through the hosted login page's form, token exchange, userinfo, introspection,
revocation, refresh rotation and reuse, and RP-initiated logout.

These endpoints are HTTP only (form posts and redirects): the rows run on the REST column
and are n/a on GraphQL and gRPC. Redirect URIs are on the deployment's own origin, which
every deployment allows whatever ``--allowed-origins`` lists; the suite never loads them,
it reads the redirect.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from bastion.conformance.catalogue.auth import PASSWORD, SESSION_COOKIE, new_user, password_signup
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario
from bastion.conformance.web import (
    Browser,
    continue_link,
    hidden_fields,
    pkce_pair,
    redirect_target,
)

REST_ONLY = ("rest",)
SCOPE = "openid profile email offline_access"
#: bastion's window in which a rotated refresh token may be presented again (two tabs).
REFRESH_GRACE_SECONDS = 10


def needs_client_secret(deployment: Deployment) -> str | None:
    return password_signup(deployment) or (
        None if deployment.client_secret else "needs --client-secret (client authentication)"
    )


def callback(ctx: Ctx) -> str:
    return f"{ctx.deployment.public_url}/conformance/callback"


def discovery(ctx: Ctx, browser: Browser) -> dict[str, Any]:
    answer = browser.get("/.well-known/openid-configuration")
    ctx.expect(answer.status_code == 200, f"discovery answered HTTP {answer.status_code}")
    document: dict[str, Any] = answer.json()
    return document


def verified_claims(ctx: Ctx, browser: Browser, token: str) -> dict[str, Any]:
    """The claims of a token the deployment signed, checked against its published JWKS
    (asymmetric keys); an HS-signed token is checked for what JWKS must never hold."""
    header = json.loads(_b64(token.split(".")[0]))
    keys = browser.get("/.well-known/jwks.json").json()
    if str(header.get("alg", "")).startswith("HS"):
        ctx.expect(
            all("k" not in key for key in keys.get("keys", [])),
            "JWKS publishes a symmetric key",
        )
        return dict(json.loads(_b64(token.split(".")[1])))
    kids = {key.get("kid") for key in keys.get("keys", [])}
    ctx.expect(header.get("kid") in kids, f"kid {header.get('kid')} is not in JWKS {kids}")
    try:
        decoded = jwt.decode(token, KeySet.import_key_set(keys), algorithms=[header["alg"]])
    except (JoseError, ValueError) as exc:
        ctx.expect(False, f"the token does not verify against JWKS: {exc}")
        raise
    return dict(decoded.claims)


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def sign_in_through_the_login_page(
    ctx: Ctx, browser: Browser, email: str, query: dict[str, str]
) -> str:
    """Follow /authorize to the login page, post its form, follow it back: the code."""
    first = browser.get("/authorize", params=query)
    target, _ = redirect_target(first)
    ctx.expect(target.endswith("/app"), f"/authorize sent a new browser to {target}")
    page = browser.get(first.headers["location"])
    ctx.expect(page.status_code == 200, f"the login page answered HTTP {page.status_code}")
    form = {**hidden_fields(page.text), "identifier": email, "password": PASSWORD}
    ctx.expect("csrf_token" in form, "the login form carries no csrf_token")
    posted = browser.post("/app", data=form)
    ctx.expect(posted.status_code == 200, f"the login form answered HTTP {posted.status_code}")
    onward = continue_link(posted.text)
    ctx.expect(onward is not None, "the signed-in page does not lead back to /authorize")
    assert onward is not None
    back = browser.get(onward)
    target, answer = redirect_target(back)
    ctx.expect(target == callback(ctx), f"redirected to {target}, not the redirect_uri")
    ctx.expect(answer.get("state") == query["state"], f"state came back as {answer}")
    ctx.expect(bool(answer.get("code")), f"no code in {answer}")
    return answer["code"]


@scenario("oauth.discovery_and_jwks", surfaces=REST_ONLY)
def discovery_and_jwks(ctx: Ctx) -> None:
    """Discovery names the deployment's public URL as issuer and its endpoints under it;
    JWKS serves every signing key with a kid and never a symmetric secret."""
    browser = ctx.browser()
    document = discovery(ctx, browser)
    issuer = ctx.deployment.public_url
    ctx.expect(document.get("issuer") == issuer, f"issuer {document.get('issuer')}")
    for name in ("authorization", "token", "userinfo", "jwks_uri"):
        key = name if name == "jwks_uri" else f"{name}_endpoint"
        ctx.expect(str(document.get(key, "")).startswith(issuer), f"{key}: {document.get(key)}")
    ctx.expect("code" in document.get("response_types_supported", []), f"{document}")
    ctx.expect(document.get("code_challenge_methods_supported") == ["S256"], f"{document}")
    keys = browser.get("/.well-known/jwks.json").json().get("keys", [])
    ctx.expect(all(k.get("kid") and "k" not in k and "d" not in k for k in keys), f"{keys}")
    algs = document.get("id_token_signing_alg_values_supported") or []
    ctx.expect(all(k.get("alg") in algs for k in keys), f"JWKS {keys} against {algs}")


@scenario(
    "oauth.code_pkce_userinfo_introspect_revoke", surfaces=REST_ONLY, requires=needs_client_secret
)
def code_flow(ctx: Ctx) -> None:
    """/authorize with PKCE through the login page's form, the code for tokens, the ID
    token verified by JWKS, userinfo, introspection, then revocation ends the refresh."""
    email, _, _ = new_user(ctx)
    browser = ctx.browser()
    if browser.get("/app").status_code == 404:
        ctx.skip("the hosted login page is off on this deployment (--enable-login-page)")
    verifier, challenge = pkce_pair()
    nonce = secrets.token_urlsafe(12)
    query = {
        "response_type": "code",
        "client_id": ctx.deployment.client_id,
        "redirect_uri": callback(ctx),
        "scope": SCOPE,
        "state": secrets.token_urlsafe(8),
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    code = sign_in_through_the_login_page(ctx, browser, email, query)
    # Another instance redeems it: the code lives in the shared store.
    other = ctx.browser(1)
    exchange = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": callback(ctx),
        "client_id": ctx.deployment.client_id,
        "code_verifier": verifier,
    }
    token = other.post("/oauth/token", data=exchange)
    ctx.expect(token.status_code == 200, f"token exchange: {token.status_code} {token.text}")
    tokens = token.json()
    ctx.expect(
        bool(tokens.get("refresh_token")), f"offline_access gave no refresh: {sorted(tokens)}"
    )
    claims = verified_claims(ctx, other, tokens["id_token"])
    ctx.expect(claims.get("iss") == ctx.deployment.public_url, f"iss {claims.get('iss')}")
    ctx.expect(claims.get("aud") == ctx.deployment.client_id, f"aud {claims.get('aud')}")
    ctx.expect(claims.get("nonce") == nonce and claims.get("email") == email, f"{claims}")
    bearer = {"authorization": f"Bearer {tokens['access_token']}"}
    info = other.get("/userinfo", headers=bearer, send_cookies=False)
    ctx.expect(info.status_code == 200, f"userinfo: HTTP {info.status_code}")
    ctx.expect(info.json().get("email") == email, f"userinfo {info.json()}")
    ctx.expect(info.json().get("sub") == claims.get("sub"), f"userinfo {info.json()}")
    auth = (ctx.deployment.client_id, ctx.deployment.client_secret or "")
    seen = other.post("/oauth/introspect", data={"token": tokens["access_token"]}, auth=auth)
    ctx.expect(seen.json().get("active") is True, f"introspection {seen.json()}")
    ctx.expect(seen.json().get("sub") == claims.get("sub"), f"introspection {seen.json()}")
    again = other.post("/oauth/token", data=exchange)
    ctx.expect(again.status_code == 400, f"a code redeemed twice: HTTP {again.status_code}")
    revoked = browser.post(
        "/oauth/revoke",
        data={"token": tokens["refresh_token"], "client_id": ctx.deployment.client_id},
    )
    ctx.expect(revoked.status_code == 200, f"revoke: HTTP {revoked.status_code}")
    refresh = {
        "grant_type": "refresh_token",
        "refresh_token": tokens["refresh_token"],
        "client_id": ctx.deployment.client_id,
    }
    after = other.post("/oauth/token", data=refresh)
    ctx.expect(after.status_code == 400, f"refresh after revoke: HTTP {after.status_code}")
    ctx.expect(after.json().get("error") == "invalid_grant", f"{after.json()}")


@scenario("oauth.refresh_rotation_and_reuse", surfaces=REST_ONLY, requires=password_signup)
def refresh_rotation(ctx: Ctx) -> None:
    """A refresh rotates the token; presenting the old one again never opens a second
    live session, and after the grace window it ends the whole family."""
    email, _, _ = new_user(ctx)
    login = ctx.expect_ok(
        ctx.call("login", {"email": email, "password": PASSWORD, "scope": ["offline_access"]})
    )
    first = str(login.get("refresh_token") or "")
    ctx.expect(bool(first), f"login with offline_access gave no refresh token: {sorted(login)}")
    browser = ctx.browser()

    def refresh(token: str) -> tuple[int, dict[str, Any]]:
        answer = browser.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": token,
                "client_id": ctx.deployment.client_id,
            },
        )
        return answer.status_code, answer.json()

    status, rotated = refresh(first)
    ctx.expect(status == 200, f"refresh: HTTP {status} {rotated.get('error')}")
    second = str(rotated.get("refresh_token") or "")
    ctx.expect(bool(second) and second != first, "the refresh token did not rotate")
    status, replay = refresh(first)
    ctx.expect(
        status == 400 or replay.get("refresh_token") == second,
        "a replay inside the grace window opened another session (a new refresh token)",
    )
    time.sleep(REFRESH_GRACE_SECONDS + 1)
    status, late = refresh(first)
    ctx.expect(status == 400 and late.get("error") == "invalid_grant", f"late reuse: {late}")
    status, _ = refresh(second)
    ctx.expect(status == 400, f"the successor still refreshes after reuse (HTTP {status})")


@scenario("oauth.rp_initiated_logout", surfaces=REST_ONLY, requires=password_signup)
def rp_logout(ctx: Ctx) -> None:
    """/logout with an id_token_hint ends the session and returns to the named page on
    the deployment's own origin with the state."""
    email, _, _ = new_user(ctx)
    outcome = ctx.call("login", {"email": email, "password": PASSWORD})
    body = ctx.expect_ok(outcome)
    session = outcome.cookie(SESSION_COOKIE) or ""
    browser = ctx.browser()
    browser.cookies[SESSION_COOKIE] = session
    bye = f"{ctx.deployment.public_url}/conformance/bye"
    answer = browser.get(
        "/logout",
        params={"id_token_hint": body["id_token"], "post_logout_redirect_uri": bye, "state": "s1"},
    )
    target, query = redirect_target(answer)
    ctx.expect((target, query) == (bye, {"state": "s1"}), f"logout sent to {target} {query}")
    ctx.expect(SESSION_COOKIE not in browser.cookies, "logout left the session cookie set")
    profile = ctx.call("profile", credentials=Credentials(cookies=((SESSION_COOKIE, session),)))
    ctx.expect_error(profile, "unauthenticated")
