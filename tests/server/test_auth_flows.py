"""The authentication flows end to end over real HTTP, with real SMTP (issue 3).

Each backend (SQLite with the SQL-backed memory store; PostgreSQL + Redis) runs two
server processes for the whole module: ``main`` (mail configured, magic links on, email
verification off, so signup logs in at once) and ``verify`` (email verification on,
plain passwords allowed, roles configured, SameSite=Lax). Every mail goes to one
:class:`~tests.mailsink.SpooledMailSink`; tests take the token out of the mail.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.mailsink import SpooledMailSink
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    ServerProcess,
    backend_storage,
    free_port,
    start_server,
)

PASSWORD = "Str0ng!pass"
NEW_PASSWORD = "N3w!password"


@dataclass
class Env:
    backend: str
    main: ServerProcess
    verify: ServerProcess
    sink: SpooledMailSink
    #: flags that reach the same database and memory store
    storage_flags: list[str]


def mail_flags(sink: SpooledMailSink) -> list[str]:
    return [
        "--smtp-host=127.0.0.1",
        f"--smtp-port={sink.port}",
        "--smtp-sender-email=bastion@example.com",
    ]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp = tmp_path_factory.mktemp(f"auth-{backend}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    storage = backend_storage(backend, tmp, "auth").flags
    common = [*storage, *mail_flags(sink), "--app-cookie-secure=false"]
    main = start_server([*common, "--enable-magic-link-login"], tmp, name="main")
    # The second server has a database and memory store of its own on every backend: it
    # is configured differently, and a queued mailed link (forgot_password, magic links)
    # is carried out by whichever process claims it from a shared outbox, with that
    # process's settings (its URL in the link; magic links off here).
    (tmp / "verify").mkdir()
    verify_storage = backend_storage(backend, tmp / "verify", "auth-verify").flags
    try:
        verify = start_server(
            [
                *verify_storage,
                *mail_flags(sink),
                "--app-cookie-secure=false",
                "--enable-email-verification",
                "--enable-strong-password=false",
                "--roles=user,editor,admin",
                "--default-roles=user",
                "--protected-roles=admin",
                "--app-cookie-same-site=lax",
                "--organization-name=Acme Test",
                "--jwt-role-claim=groups",
            ],
            tmp,
            name="verify",
        )
    except BaseException:
        main.terminate()
        sink.stop()
        raise
    try:
        yield Env(backend, main, verify, sink, storage)
    finally:
        verify.terminate()
        main.terminate()
        sink.stop()


def client_for(server: ServerProcess) -> httpx.Client:
    """A client that never keeps cookies: every test says which cookie it sends."""
    jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return server.client(cookies=jar)


@pytest.fixture
def main(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.main) as client:
        yield client


# -- helpers shared by the other test_auth_* modules ------------------------------------------


def unique_email(tag: str = "user") -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


def signup(
    client: httpx.Client, email: str, password: str = PASSWORD, **extra: Any
) -> httpx.Response:
    body = {"email": email, "password": password, "confirm_password": password, **extra}
    return client.post("/v1/signup", json=body)


def login(
    client: httpx.Client, email: str, password: str = PASSWORD, **extra: Any
) -> httpx.Response:
    return client.post("/v1/login", json={"email": email, "password": password, **extra})


def new_user(client: httpx.Client, **login_extra: Any) -> tuple[str, dict[str, Any]]:
    email = unique_email()
    assert signup(client, email).status_code == 200
    response = login(client, email, **login_extra)
    assert response.status_code == 200, response.text
    return email, response.json()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def session_cookie(response: httpx.Response, name: str = "cookie_session") -> str:
    for header in response.headers.get_list("set-cookie"):
        found, _, rest = header.partition("=")
        if found == name:
            return rest.split(";", 1)[0]
    raise AssertionError(f"no {name} in {response.headers.get_list('set-cookie')}")


def as_signer(signed_up: httpx.Response) -> dict[str, str]:
    """Headers that present the signer cookie a sign-up answer set: the browser that chose
    the password follows its verification link (and keeps that password)."""
    return {"cookie": f"bastion_signup={session_cookie(signed_up, 'bastion_signup')}"}


def with_cookie(value: str) -> dict[str, str]:
    return {"cookie": f"cookie_session={value}"}


def mails_to(
    sink: SpooledMailSink, address: str, count: int = 1, timeout: float = 30
) -> list[EmailMessage]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [m for m in sink.messages() if m["To"] == address]
        if len(found) >= count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"expected {count} mail(s) to {address}")


def link_in(mail: EmailMessage) -> str:
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None
    match = re.search(r"https?://\S+", body.get_content())
    assert match is not None, body.get_content()
    return match.group(0)


def token_in(mail: EmailMessage) -> str:
    return parse_qs(urlsplit(link_in(mail)).query)["token"][0]


def validate(
    client: httpx.Client, token: str, token_type: str = "access_token", **extra: Any
) -> httpx.Response:
    body = {"token_type": token_type, "token": token, **extra}
    return client.post("/v1/validate_jwt_token", json=body)


# -- signup, login, profile, logout -------------------------------------------------------------


def test_signup_logs_in_without_an_id_token_and_sets_the_sealed_cookie_pair(
    main: httpx.Client,
) -> None:
    email = unique_email()
    response = signup(main, email, given_name="Ada")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message"] == "Signed up successfully."
    assert body["access_token"]
    assert body["id_token"] is None
    assert body["user"]["email"] == email
    assert body["user"]["given_name"] == "Ada"
    assert body["user"]["roles"] == ["user"]
    cookies = response.headers.get_list("set-cookie")
    pair = {c.split("=", 1)[0]: c for c in cookies}
    assert set(pair) == {"cookie_session", "cookie_session_domain"}
    for header in pair.values():
        assert "HttpOnly" in header
        # Lax by default: no listed origin on another site.
        assert "SameSite=Lax" in header
        assert "Secure" not in header
    sealed = session_cookie(response)
    # a sealed reference, not a token: no JWT shape, no token inside
    assert sealed.count(".") == 0
    assert body["access_token"] not in sealed
    assert "Domain=127.0.0.1" in pair["cookie_session_domain"]


def test_login_profile_and_logout_take_effect_at_once(main: httpx.Client) -> None:
    email, tokens = new_user(main)
    assert tokens["message"] == "Logged in successfully"
    assert tokens["id_token"]
    assert tokens["refresh_token"] is None
    profile = main.get("/v1/profile", headers=bearer(tokens["access_token"]))
    assert profile.status_code == 200
    assert profile.json()["email"] == email
    assert validate(main, tokens["access_token"]).json()["is_valid"] is True
    out = main.post("/v1/logout", json={}, headers=bearer(tokens["access_token"]))
    assert out.status_code == 200
    assert out.json() == {"message": "Logged out successfully"}
    assert any("Max-Age=0" in c for c in out.headers.get_list("set-cookie"))
    assert main.get("/v1/profile", headers=bearer(tokens["access_token"])).status_code == 401
    gone = validate(main, tokens["access_token"])
    assert gone.status_code == 401
    assert gone.json()["message"] == "invalid token"
    assert main.post("/v1/logout", json={}).status_code == 401


def test_profile_by_cookie_and_validate_session(main: httpx.Client) -> None:
    email = unique_email()
    cookie = session_cookie(signup(main, email))
    assert main.get("/v1/profile", headers=with_cookie(cookie)).json()["email"] == email
    valid = main.post("/v1/validate_session", json={"cookie": cookie})
    assert valid.status_code == 200
    assert valid.json()["is_valid"] is True
    assert valid.json()["user"]["email"] == email
    by_header = main.post("/v1/validate_session", json={}, headers=with_cookie(cookie))
    assert by_header.status_code == 200
    refused = main.post("/v1/validate_session", json={"cookie": cookie, "roles": ["admin"]})
    assert refused.status_code == 401
    forged = main.post("/v1/validate_session", json={"cookie": cookie[:-4] + "AAAA"})
    assert forged.status_code == 401
    assert forged.json()["message"] == "unauthorized"


def test_wrong_password_and_unknown_user_answer_alike(main: httpx.Client) -> None:
    email, _ = new_user(main)
    wrong = login(main, email, "Wr0ng!password")
    unknown = login(main, unique_email(), PASSWORD)
    for response in (wrong, unknown):
        assert response.status_code == 401
        assert response.json() == {"code": "unauthenticated", "message": "invalid credentials"}


def test_failed_logins_throttle_per_identifier_known_or_not(main: httpx.Client) -> None:
    email, _ = new_user(main)
    for identifier in (email, unique_email("ghost")):
        for _ in range(5):
            assert login(main, identifier, "Wr0ng!password").status_code == 401
        throttled = login(main, identifier, "Wr0ng!password")
        assert throttled.status_code == 429
        assert throttled.json()["message"] == "invalid credentials"
        assert int(throttled.headers["retry-after"]) > 0
    # even the right password waits now: the throttle is checked before the password
    assert login(main, email).status_code == 429


def test_signup_refusals(main: httpx.Client) -> None:
    email = unique_email()
    assert signup(main, email).status_code == 200
    duplicate = signup(main, email.upper())
    assert duplicate.status_code == 400
    assert duplicate.json()["message"] == "user with given email already exists"
    weak = signup(main, unique_email(), "password")
    assert weak.status_code == 400
    assert weak.json()["message"].startswith("password is not valid")
    short = signup(main, unique_email(), "Ab1!")
    assert short.json()["message"] == (
        "password must be of minimum 6 characters and maximum 36 characters"
    )
    differ = main.post(
        "/v1/signup",
        json={"email": unique_email(), "password": PASSWORD, "confirm_password": PASSWORD + "x"},
    )
    assert differ.json()["message"] == "password and confirm password does not match"
    assert signup(main, unique_email(), roles=["admin"]).json()["message"] == "invalid roles"
    phone = main.post(
        "/v1/signup",
        json={"phone_number": "+15550001111", "password": PASSWORD, "confirm_password": PASSWORD},
    )
    assert phone.status_code == 200, phone.text
    again = main.post(
        "/v1/signup",
        json={"phone_number": "+15550001111", "password": PASSWORD, "confirm_password": PASSWORD},
    )
    assert again.json()["message"] == "user with given phone number already exists"
    by_phone = main.post("/v1/login", json={"phone_number": "+15550001111", "password": PASSWORD})
    assert by_phone.status_code == 200


def test_stored_hashes_are_argon2id_with_the_fixed_parameters(env: Env, main: httpx.Client) -> None:
    email, _tokens = new_user(main)
    if env.backend != "sqlite":
        return
    import sqlite3

    path = next(f.split("=", 1)[1] for f in env.storage_flags if f.startswith("--database-url="))
    with sqlite3.connect(path) as db:
        (stored,) = db.execute(
            "SELECT password FROM service_users WHERE email = ?", (email,)
        ).fetchone()
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")


# -- session rotation, refresh, revoke --------------------------------------------------------


def test_session_needs_the_cookie_and_rotates_it(main: httpx.Client) -> None:
    email = unique_email()
    first = signup(main, email)
    cookie, access = session_cookie(first), first.json()["access_token"]
    refused = main.post("/v1/session", json={}, headers=bearer(access))
    assert refused.status_code == 401
    assert refused.json()["message"] == "unauthorized"
    rotated = main.post("/v1/session", json={}, headers=with_cookie(cookie))
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["message"] == "Session token refreshed"
    assert rotated.json()["id_token"]
    assert rotated.json()["user"]["email"] == email
    new_cookie = session_cookie(rotated)
    assert new_cookie != cookie
    stale = main.post("/v1/session", json={}, headers=with_cookie(cookie))
    assert stale.status_code == 401
    assert main.post("/v1/session", json={}, headers=with_cookie(new_cookie)).status_code == 200
    # the access token of the rotated-away session died with it
    assert main.get("/v1/profile", headers=bearer(access)).status_code == 401


def refresh(client: httpx.Client, token: str) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": CLIENT_ID}
    return client.post("/oauth/token", data=form)


def test_refresh_rotates_and_refuses_a_concurrent_duplicate(main: httpx.Client) -> None:
    _, tokens = new_user(main, scope=["openid", "offline_access"])
    first = tokens["refresh_token"]
    assert first
    assert validate(main, first, "refresh_token").status_code == 200
    rotated = refresh(main, first)
    assert rotated.status_code == 200, rotated.text
    body = rotated.json()
    assert body["token_type"] == "Bearer"
    assert body["scope"] == "openid offline_access"
    assert body["refresh_token"]
    assert body["refresh_token"] != first
    assert session_cookie(rotated)
    # a second tab presenting the same token inside the grace window is refused (never a
    # second live session), and the family lives on in its successor
    for _ in range(3):
        twin = refresh(main, first)
        assert twin.status_code == 400, twin.text
        assert twin.json()["error"] == "invalid_grant"
    assert refresh(main, body["refresh_token"]).status_code == 200
    assert main.get("/v1/profile", headers=bearer(tokens["access_token"])).status_code == 401


def test_refresh_errors(main: httpx.Client) -> None:
    assert refresh(main, "not-a-token").json()["error"] == "invalid_grant"
    bad_client = main.post(
        "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x", "client_id": "x"}
    )
    assert bad_client.status_code == 400
    assert bad_client.json()["error"] == "invalid_client"
    grant = main.post("/oauth/token", data={"grant_type": "password", "client_id": CLIENT_ID})
    assert grant.json()["error"] == "unsupported_grant_type"


def test_revoke_ends_the_refresh_token(main: httpx.Client) -> None:
    _, tokens = new_user(main, scope=["openid", "offline_access"])
    revoked = main.post("/v1/revoke", json={"refresh_token": tokens["refresh_token"]})
    assert revoked.status_code == 200
    assert revoked.json() == {"message": "Token revoked"}
    assert refresh(main, tokens["refresh_token"]).status_code == 400
    again = main.post("/v1/revoke", json={"refresh_token": tokens["refresh_token"]})
    assert again.status_code == 404
    assert again.json()["message"] == "token not found"
    assert (
        main.post("/v1/revoke", json={"refresh_token": "junk"}).json()["message"] == "invalid token"
    )
    _, other = new_user(main, scope=["openid", "offline_access"])
    rfc = main.post("/oauth/revoke", data={"token": other["refresh_token"], "client_id": CLIENT_ID})
    assert rfc.status_code == 200
    assert rfc.json() == {}
    assert refresh(main, other["refresh_token"]).status_code == 400
    unknown = main.post("/oauth/revoke", data={"token": "whatever", "client_id": CLIENT_ID})
    assert unknown.status_code == 200
    _, third = new_user(main)
    access = main.post(
        "/oauth/revoke",
        data={
            "token": third["access_token"],
            "token_type_hint": "access_token",
            "client_id": CLIENT_ID,
        },
    )
    assert access.status_code == 200
    assert validate(main, third["access_token"]).status_code == 401
    wrong_client = main.post("/oauth/revoke", data={"token": "x", "client_id": "other"})
    assert wrong_client.status_code == 401


# -- account changes ------------------------------------------------------------------------------


def test_deactivated_user_cannot_log_in_refresh_or_validate(main: httpx.Client) -> None:
    email, tokens = new_user(main, scope=["openid", "offline_access"])
    other = login(main, email, scope=["openid", "offline_access"]).json()
    done = main.post("/v1/deactivate_account", json={}, headers=bearer(tokens["access_token"]))
    assert done.status_code == 200
    assert done.json() == {"message": "user account deactivated successfully"}
    assert login(main, email).json()["message"] == "invalid credentials"
    for session in (tokens, other):
        assert validate(main, session["access_token"]).status_code == 401
        assert validate(main, session["id_token"], "id_token").status_code == 401
        assert refresh(main, session["refresh_token"]).status_code == 400


def test_update_profile_and_password_change_ends_other_sessions(main: httpx.Client) -> None:
    email, mine = new_user(main)
    other = login(main, email).json()
    auth = bearer(mine["access_token"])
    assert main.post("/v1/update_profile", json={}, headers=auth).json()["message"] == (
        "please enter at least one param to update"
    )
    named = main.post("/v1/update_profile", json={"given_name": "Grace"}, headers=auth)
    assert named.json() == {"message": "Profile details updated successfully."}
    assert main.get("/v1/profile", headers=auth).json()["given_name"] == "Grace"
    # Without phone verification a new number is taken as it is (as at signup).
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"
    numbered = main.post("/v1/update_profile", json={"phone_number": phone}, headers=auth)
    assert numbered.status_code == 200, numbered.text
    profile = main.get("/v1/profile", headers=auth).json()
    assert (profile["phone_number"], profile["phone_number_verified"]) == (phone, True)
    wrong_old = main.post(
        "/v1/update_profile",
        json={
            "old_password": "nope",
            "new_password": NEW_PASSWORD,
            "confirm_new_password": NEW_PASSWORD,
        },
        headers=auth,
    )
    assert wrong_old.json()["message"] == "incorrect old password"
    changed = main.post(
        "/v1/update_profile",
        json={
            "old_password": PASSWORD,
            "new_password": NEW_PASSWORD,
            "confirm_new_password": NEW_PASSWORD,
        },
        headers=auth,
    )
    assert changed.status_code == 200, changed.text
    assert main.get("/v1/profile", headers=auth).status_code == 200
    assert main.get("/v1/profile", headers=bearer(other["access_token"])).status_code == 401
    assert login(main, email).status_code == 401
    assert login(main, email, NEW_PASSWORD).status_code == 200


# -- tokens ------------------------------------------------------------------------------------


def test_validate_jwt_token_checks_type_roles_and_claims(env: Env, main: httpx.Client) -> None:
    _, tokens = new_user(main)
    ok = validate(main, tokens["access_token"], roles=["user"])
    assert ok.status_code == 200
    claims = ok.json()["claims"]
    assert claims["iss"] == env.main.url
    assert claims["aud"] == CLIENT_ID
    assert validate(main, tokens["access_token"], roles=["admin"]).status_code == 401
    assert validate(main, tokens["id_token"], "id_token").status_code == 200
    assert (
        validate(main, tokens["access_token"], "nonsense").json()["message"] == "invalid token type"
    )
    as_id = validate(main, tokens["access_token"], "id_token")
    assert as_id.status_code == 401
    assert as_id.json()["message"] == "invalid claims"
    relations = validate(
        main, tokens["access_token"], required_relations=[{"relation": "viewer", "object": "doc:1"}]
    )
    # the engine is on (SQL database) but no model grants anything: refused
    assert relations.status_code == 403
    assert relations.json()["message"] == "unauthorized"


def test_discovery_documents_name_the_configured_url(env: Env, main: httpx.Client) -> None:
    config = main.get(
        "/.well-known/openid-configuration",
        headers={"x-authorizer-url": "https://evil.example", "host": "evil.example"},
    ).json()
    assert config["issuer"] == env.main.url
    assert config["jwks_uri"] == f"{env.main.url}/.well-known/jwks.json"
    assert main.get("/.well-known/jwks.json").json() == {"keys": []}


# -- emailed links ---------------------------------------------------------------------------------


def test_forgot_and_reset_password_by_mailed_token(env: Env, main: httpx.Client) -> None:
    email, session = new_user(main)
    unknown = main.post("/v1/forgot_password", json={"email": unique_email("nobody")})
    known = main.post(
        "/v1/forgot_password",
        json={"email": email},
        headers={"x-authorizer-url": "https://evil.example", "x-forwarded-host": "evil.example"},
    )
    assert known.status_code == unknown.status_code == 200
    assert known.json() == unknown.json()
    (mail,) = mails_to(env.sink, email)
    assert mail["Subject"] == "Reset Password"
    assert link_in(mail).startswith(f"{env.main.url}/app/reset-password?token=")
    token = token_in(mail)
    weak = main.post(
        "/v1/reset_password", json={"token": token, "password": "weak", "confirm_password": "weak"}
    )
    assert weak.status_code == 400
    reset = main.post(
        "/v1/reset_password",
        json={"token": token, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
    )
    assert reset.status_code == 200
    assert reset.json() == {"message": "Password updated successfully."}
    reused = main.post(
        "/v1/reset_password",
        json={"token": token, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
    )
    assert reused.status_code == 400
    assert reused.json()["message"] == "invalid token"
    assert main.get("/v1/profile", headers=bearer(session["access_token"])).status_code == 401
    assert login(main, email).status_code == 401
    assert login(main, email, NEW_PASSWORD).status_code == 200


def test_magic_link_lands_logged_in_once(env: Env, main: httpx.Client) -> None:
    email = unique_email("magic")
    first = main.post("/v1/magic_link_login", json={"email": email})
    assert first.status_code == 200
    assert first.json()["message"].startswith("If an account exists for this email")
    (mail,) = mails_to(env.sink, email)
    link = link_in(mail)
    assert link.startswith(f"{env.main.url}/verify_email?token=")
    path = link.removeprefix(env.main.url)
    landing = main.get(path, follow_redirects=False)
    assert landing.status_code == 307
    target = urlsplit(landing.headers["location"])
    query = parse_qs(target.query)
    assert f"{target.scheme}://{target.netloc}" == env.main.url
    assert query["token_type"] == ["bearer"]
    assert query["access_token"]
    assert session_cookie(landing)
    claims = validate(main, query["access_token"][0]).json()["claims"]
    assert claims["login_method"] == "magic_link_login"
    again = main.get(path, follow_redirects=False)
    assert again.status_code == 307
    assert "error=" in again.headers["location"]


# -- the verification server ---------------------------------------------------------------------


@pytest.fixture
def verify(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.verify) as client:
        yield client


def test_email_verification_gates_login_until_the_mailed_token(
    env: Env, verify: httpx.Client
) -> None:
    email = unique_email("verify")
    created = signup(verify, email, "plainpass", roles=["editor"])
    assert created.status_code == 200, created.text
    assert created.json()["message"] == "Verification email has been sent. Please check your inbox"
    assert created.json()["access_token"] is None
    assert login(verify, email, "plainpass").status_code == 401
    (mail,) = mails_to(env.sink, email)
    assert mail["Subject"] == "Please verify your email"
    assert "Acme Test" in str(mail)
    resent = verify.post(
        "/v1/resend_verify_email", json={"email": email, "identifier": "basic_auth_signup"}
    )
    assert resent.status_code == 200
    old_token, new_token = token_in(mail), token_in(mails_to(env.sink, email, 2)[1])
    stale = verify.post("/v1/verify_email", json={"token": old_token})
    assert stale.status_code == 400
    assert stale.json()["message"] == "invalid verification token"
    done = verify.post("/v1/verify_email", json={"token": new_token}, headers=as_signer(created))
    assert done.status_code == 200, done.text
    assert done.json()["message"] == "Email verified successfully."
    assert "SameSite=Lax" in done.headers.get_list("set-cookie")[0]
    assert verify.post("/v1/verify_email", json={"token": new_token}).status_code == 400
    logged = login(verify, email, "plainpass", roles=["editor"])
    assert logged.status_code == 200
    claims = validate(verify, logged.json()["id_token"], "id_token").json()["claims"]
    assert claims["groups"] == ["editor"]
    assert signup(verify, unique_email(), "plainpass", roles=["admin"]).json()["message"] == (
        "invalid roles"
    )


# -- audit rows and webhook events ---------------------------------------------------------------


def test_every_flow_leaves_audit_rows(env: Env, main: httpx.Client) -> None:
    email, tokens = new_user(main)
    user_id = tokens["user"]["id"]
    assert login(main, email, "Wr0ng!password").status_code == 401
    assert (
        main.post("/v1/logout", json={}, headers=bearer(tokens["access_token"])).status_code == 200
    )
    listed = main.post(
        "/v1/admin/audit_logs",
        json={"actor_id": user_id, "pagination": {"limit": 50}},
        headers={"x-service-admin-secret": ADMIN_SECRET},
    )
    assert listed.status_code == 200, listed.text
    rows = listed.json()["audit_logs"]
    actions = {row["action"] for row in rows}
    assert {"user.signup", "user.login_success", "user.login_failed", "user.logout"} <= actions
    assert all('"protocol":"rest"' in row["metadata"].replace(" ", "") for row in rows)
    assert all(row["ip_address"] == "127.0.0.1" for row in rows)
