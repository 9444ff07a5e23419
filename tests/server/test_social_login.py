"""Social login end to end, for each of the ten providers (issue 10).

One bastion process on SQLite is configured with all ten providers, each pointed at a
local fake that speaks that provider's documented protocol (``tests/fakes/social``). The
browser is an httpx client keeping cookies: it starts at ``/oauth_login/<provider>``,
follows the redirect to the fake's authorize endpoint, comes back to our callback (a
redirect, or Apple's auto-posting form), and must end at the application's
``redirect_uri`` with a session cookie that works on ``/v1/profile``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.fakes.social import FakeProvider, Person
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, start_server
from tests.server.social import (
    PROVIDERS,
    at_provider,
    back_to_server,
    fakes,
    provider_flags,
    query,
    sign_in,
    start,
)


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, FakeProvider]]:
    with fakes(PROVIDERS) as found:
        yield found


@pytest.fixture(scope="module")
def server(
    providers: dict[str, FakeProvider], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("social")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp, "social")),
        *provider_flags(providers),
        # Roblox gives an address only to apps granted its email scope.
        "--roblox-scopes=openid,profile,email",
        "--roles=user,editor,admin",
        "--protected-roles=admin",
    ]
    srv = start_server(flags, tmp)
    try:
        yield srv
    finally:
        srv.terminate()


@pytest.fixture
def browser(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def new_person(**changes: Any) -> Person:
    tag = uuid.uuid4().hex[:10]
    return Person(sub=str(int(tag, 16)), email=f"social-{tag}@example.com", **changes)


def app_url(server: ServerProcess) -> str:
    return f"{server.url}/app/after-login"


def admin(server: ServerProcess) -> dict[str, str]:
    return {"x-service-admin-secret": ADMIN_SECRET, "origin": server.url}


def user_by_email(server: ServerProcess, email: str) -> dict[str, Any] | None:
    response = httpx.post(
        f"{server.url}/v1/admin/user", json={"email": email}, headers=admin(server)
    )
    return response.json() if response.status_code == 200 else None


# -- every provider, end to end ------------------------------------------------------------


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_new_person_gets_an_account_and_a_working_session(
    name: str,
    server: ServerProcess,
    providers: dict[str, FakeProvider],
    browser: httpx.Client,
) -> None:
    fake = providers[name]
    fake.person = person = new_person()
    done = sign_in(browser, name, redirect_uri=app_url(server), state="app-state-1")

    assert done.status_code == 302, done.text
    location = done.headers["location"]
    assert location.startswith(app_url(server) + "?")
    back = query(location)
    assert back["state"] == "app-state-1"
    assert back["token_type"] == "bearer"
    assert back["access_token"]
    assert back["id_token"]
    assert "refresh_token" not in back
    assert "error" not in back
    profile = browser.get("/v1/profile")
    assert profile.status_code == 200, profile.text
    user = profile.json()
    assert user["email"] == person.email
    assert user["email_verified"] is True
    assert user["signup_methods"] == name
    assert user["roles"] == ["user"]
    # the access token in the redirect works as a bearer token too
    bearer = httpx.get(
        f"{server.url}/v1/profile", headers={"authorization": f"Bearer {back['access_token']}"}
    )
    assert bearer.json()["id"] == user["id"]
    # the provider was spoken to in its own way: code exchanged, exactly once
    assert len(fake.requests_to(fake.dialect.token.replace("{tenant}", "common"))) >= 1


@pytest.mark.parametrize("name", ["apple", "twitter", "microsoft", "github"])
def test_provider_specific_exchange(
    name: str, server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    fake = providers[name]
    fake.person = new_person()
    fake.seen.clear()
    first = start(browser, name, redirect_uri=app_url(server))
    authorize = query(first.headers["location"])
    done = back_to_server(browser, at_provider(first.headers["location"]))
    assert "access_token" in query(done.headers["location"])
    tokens = [s for s in fake.seen if s.path.endswith(fake.dialect.token.rsplit("/", 1)[-1])]
    if name == "apple":
        # form_post callback; the client secret is an ES256 JWT the fake verified
        assert authorize["response_mode"] == "form_post"
        assert authorize["nonce"]
        assert tokens[0].form["client_secret"].count(".") == 2
        assert browser.get("/v1/profile").json()["given_name"] == fake.person.given_name
    if name == "twitter":
        assert authorize["code_challenge_method"] == "S256"
        assert tokens[0].headers["authorization"].startswith("Basic ")
        assert "client_secret" not in tokens[0].form
        assert "users.email" in authorize["scope"].split()
    if name == "microsoft":
        assert first.headers["location"].startswith(f"{fake.url}/common/oauth2/v2.0/authorize")
    if name == "github":
        # the address is private: it came from /user/emails
        assert fake.requests_to("/user/emails")


def test_an_existing_account_is_linked_by_its_verified_address(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    person = new_person()
    signed = browser.post(
        "/v1/signup",
        json={"email": person.email, "password": "Str0ng!pw#1", "confirm_password": "Str0ng!pw#1"},
    )
    assert signed.status_code == 200, signed.text
    browser.cookies.clear()
    providers["github"].person = person
    done = sign_in(browser, "github", redirect_uri=app_url(server))
    assert "access_token" in query(done.headers["location"])
    user = browser.get("/v1/profile").json()
    assert user["id"] == signed.json()["user"]["id"]
    assert user["signup_methods"] == "basic_auth,github"
    # and the password still works
    login = httpx.post(
        f"{server.url}/v1/login",
        json={"email": person.email, "password": "Str0ng!pw#1"},
        headers={"origin": server.url},
    )
    assert login.status_code == 200


def test_a_returning_person_signs_in_to_the_same_account(
    server: ServerProcess, providers: dict[str, FakeProvider]
) -> None:
    providers["discord"].person = new_person()
    ids = []
    for _ in range(2):
        with server.client() as browser:
            sign_in(browser, "discord", redirect_uri=app_url(server))
            ids.append(browser.get("/v1/profile").json()["id"])
    assert ids[0] == ids[1]


@pytest.mark.parametrize("name", ["github", "google", "discord", "linkedin"])
def test_an_unverified_address_is_never_linked(
    name: str, server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    person = new_person(email_verified=False)
    signed = browser.post(
        "/v1/signup",
        json={"email": person.email, "password": "Str0ng!pw#1", "confirm_password": "Str0ng!pw#1"},
    )
    assert signed.status_code == 200
    browser.cookies.clear()
    providers[name].person = person
    done = sign_in(browser, name, redirect_uri=app_url(server), state="s-9")
    back = query(done.headers["location"])
    assert back == {"error": "the provider did not give a verified email address", "state": "s-9"}
    assert "cookie_session" not in done.headers.get("set-cookie", "")
    assert browser.get("/v1/profile").status_code == 401
    stored = user_by_email(server, person.email or "")
    assert stored is not None
    assert stored["signup_methods"] == "basic_auth"


def test_no_account_without_an_address(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["twitter"].person = person = new_person(email_verified=False)
    done = sign_in(browser, "twitter", redirect_uri=app_url(server))
    assert query(done.headers["location"])["error"] == (
        "the provider did not give a verified email address"
    )
    assert user_by_email(server, person.email or "") is None


def test_microsoft_work_account_address_needs_the_domain_verified_claim(
    server: ServerProcess, providers: dict[str, FakeProvider]
) -> None:
    fake = providers["microsoft"]
    tenant = str(uuid.uuid4())
    fake.person = new_person(tenant=tenant)
    with server.client() as browser:
        done = sign_in(browser, "microsoft", redirect_uri=app_url(server))
        assert "error" in query(done.headers["location"])
    fake.person = new_person(tenant=tenant, xms_edov=True)
    with server.client() as browser:
        done = sign_in(browser, "microsoft", redirect_uri=app_url(server))
        assert "access_token" in query(done.headers["location"])


# -- refusals --------------------------------------------------------------------------------


def test_a_callback_in_another_browser_is_refused(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["google"].person = person = new_person()
    first = start(browser, "google", redirect_uri=app_url(server), state="mine")
    answer = at_provider(first.headers["location"])
    with server.client() as other:  # no binding cookie
        done = other.get(answer.headers["location"])
    assert done.status_code == 302
    assert query(done.headers["location"]) == {"error": "invalid or expired state", "state": "mine"}
    assert user_by_email(server, person.email or "") is None
    # the state was used up: the right browser cannot replay it either
    again = browser.get(answer.headers["location"])
    assert again.status_code == 400
    assert again.json() == {"code": "invalid_argument", "message": "invalid or expired state"}


def test_a_forged_binding_cookie_is_refused(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["google"].person = new_person()
    first = start(browser, "google", redirect_uri=app_url(server))
    answer = at_provider(first.headers["location"])
    with server.client() as other:
        done = other.get(answer.headers["location"], headers={"cookie": "social_login=forged"})
    assert query(done.headers["location"])["error"] == "invalid or expired state"


def test_a_state_for_one_provider_does_not_finish_another(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["google"].person = new_person()
    first = start(browser, "google", redirect_uri=app_url(server))
    state = query(first.headers["location"])["state"]
    done = browser.get("/oauth_callback/github", params={"state": state, "code": "x"})
    assert query(done.headers["location"])["error"] == "invalid or expired state"


@pytest.mark.parametrize("state", ["", "never-issued", "x" * 5000])
def test_unknown_state_is_a_json_400(state: str, browser: httpx.Client) -> None:
    done = browser.get("/oauth_callback/github", params={"state": state, "code": "x"})
    assert done.status_code == 400
    assert done.json()["code"] == "invalid_argument"


@pytest.mark.parametrize("name", ["myspace", "GOOGLE", ""])
def test_unknown_provider_is_a_json_400(name: str, browser: httpx.Client) -> None:
    done = browser.get(f"/oauth_login/{name}")
    if name == "":
        assert done.status_code == 404
        return
    assert done.status_code == 400
    assert done.json() == {
        "code": "invalid_argument",
        "message": "unknown or unconfigured provider",
    }


@pytest.mark.parametrize(
    "redirect_uri",
    ["https://evil.example/cb", "javascript:alert(1)", "//evil.example/cb", "/relative"],
)
def test_a_redirect_uri_outside_the_allowed_origins_is_refused(
    redirect_uri: str, browser: httpx.Client
) -> None:
    done = start(browser, "github", redirect_uri=redirect_uri)
    assert done.status_code == 400
    assert done.json() == {"code": "invalid_argument", "message": "invalid redirect URI"}
    assert "social_login" not in done.headers.get("set-cookie", "")


def test_an_overlong_application_state_is_refused(browser: httpx.Client) -> None:
    done = start(browser, "github", state="s" * 1025)
    assert done.status_code == 400
    assert done.json() == {"code": "invalid_argument", "message": "state is too long"}


def test_no_redirect_uri_means_the_app(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["linkedin"].person = new_person()
    done = sign_in(browser, "linkedin")
    assert done.headers["location"].startswith(f"{server.url}/app?")


def test_a_token_endpoint_error_goes_back_to_the_app(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    fake = providers["facebook"]
    fake.person = person = new_person()
    fake.token_error = "invalid_grant"
    try:
        done = sign_in(browser, "facebook", redirect_uri=app_url(server), state="st")
    finally:
        fake.token_error = None
    assert query(done.headers["location"]) == {
        "error": "token exchange failed: invalid_grant",
        "state": "st",
    }
    assert user_by_email(server, person.email or "") is None


def test_the_person_declining_goes_back_to_the_app(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    fake = providers["twitch"]
    fake.deny = True
    try:
        done = sign_in(browser, "twitch", redirect_uri=app_url(server), state="st")
    finally:
        fake.deny = False
    assert query(done.headers["location"]) == {"error": "access_denied", "state": "st"}


@pytest.mark.parametrize(
    ("name", "changes", "reason"),
    [
        ("google", {"forge": True}, "the provider's ID token does not verify"),
        ("roblox", {"forge": True}, "the provider's ID token does not verify"),
        ("microsoft", {"iss": "https://login.example/other/v2.0"}, "unexpected issuer"),
        ("apple", {"nonce": "replayed"}, "nonce mismatch"),
        ("twitch", {"aud": "another-client"}, "unexpected audience"),
        ("google", {"exp": 1}, "expired"),
    ],
)
def test_an_id_token_that_does_not_check_out_is_refused(
    name: str,
    changes: dict[str, Any],
    reason: str,
    server: ServerProcess,
    providers: dict[str, FakeProvider],
    browser: httpx.Client,
) -> None:
    fake = providers[name]
    fake.person = person = new_person()
    fake.forge_id_tokens = bool(changes.pop("forge", False))
    fake.id_token_changes = changes
    try:
        done = sign_in(browser, name, redirect_uri=app_url(server), state="t")
    finally:
        fake.forge_id_tokens, fake.id_token_changes = False, {}
    error = query(done.headers["location"])["error"]
    assert error.endswith(reason)
    assert user_by_email(server, person.email or "") is None


def test_offline_access_keeps_the_refresh_token_out_of_the_url(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["github"].person = new_person()
    done = sign_in(browser, "github", redirect_uri=app_url(server), scope="openid offline_access")
    assert "refresh_token" not in query(done.headers["location"])
    session = browser.post("/v1/session", json={"scope": ["openid", "offline_access"]})
    assert session.status_code == 200, session.text
    assert session.json()["refresh_token"]


# -- roles, webhooks-adjacent records, meta -----------------------------------------------------


def test_requested_roles_follow_the_signup_rules(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["google"].person = new_person()
    done = sign_in(browser, "google", redirect_uri=app_url(server), roles="editor")
    assert "access_token" in query(done.headers["location"])
    assert browser.get("/v1/profile").json()["roles"] == ["editor"]
    providers["google"].person = new_person()
    with server.client() as other:
        refused = sign_in(other, "google", redirect_uri=app_url(server), roles="admin")
    assert query(refused.headers["location"])["error"] == "invalid roles"


def test_the_login_is_audited(
    server: ServerProcess, providers: dict[str, FakeProvider], browser: httpx.Client
) -> None:
    providers["roblox"].person = person = new_person()
    sign_in(browser, "roblox", redirect_uri=app_url(server))
    user = browser.get("/v1/profile").json()
    logs = httpx.post(
        f"{server.url}/v1/admin/audit_logs",
        json={"actor_id": user["id"]},
        headers=admin(server),
    ).json()["audit_logs"]
    actions = {log["action"] for log in logs}
    assert {"user.signup", "oauth.callback_success"} <= actions
    assert person.email


def test_meta_shows_every_configured_provider_on_every_surface(server: ServerProcess) -> None:
    rest = httpx.get(f"{server.url}/v1/meta").json()
    graphql = httpx.post(
        f"{server.url}/graphql",
        json={"query": "{ meta { " + " ".join(f"is_{p}_login_enabled" for p in PROVIDERS) + " } }"},
        headers={"origin": server.url},
    ).json()["data"]["meta"]
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        meta = authorizer_pb2_grpc.AuthorizerServiceStub(channel).Meta(
            authorizer_pb2.MetaRequest(), timeout=10
        )
    for provider in PROVIDERS:
        field = f"is_{provider}_login_enabled"
        assert rest[field] is True
        assert graphql[field] is True
        assert getattr(meta, field) is True
