"""Social login on PostgreSQL with Redis as the memory store, across two server processes:
the login begun on one finishes on the other (the pending state lives in Redis). Here only
GitHub and Apple are configured, Apple with a ready-made client secret (a JWT signed
beforehand, as Authorizer takes it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from joserfc import jwt

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.fakes.social import FakeProvider, Person
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, start_server
from tests.server.social import PROVIDERS, at_provider, back_to_server, fakes, query, start
from tests.webhook_receiver import Receiver, receiver

PUBLIC = "http://login.social.test"


@pytest.fixture(scope="module")
def providers() -> Iterator[dict[str, FakeProvider]]:
    with fakes(["github", "apple"]) as found:
        yield found


def presigned_apple_secret(fake: FakeProvider) -> str:
    now = int(time.time())
    claims = {
        "iss": fake.apple_team,
        "iat": now,
        "exp": now + 86400,
        "aud": fake.url,
        "sub": fake.client_id,
    }
    header = {"alg": "ES256", "kid": fake.apple_key_id}
    return jwt.encode(header, claims, fake.apple_key, algorithms=["ES256"])


@pytest.fixture(scope="module")
def servers(
    providers: dict[str, FakeProvider], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("social-pg")
    github, apple = providers["github"], providers["apple"]
    flags = [
        *base_flags("postgres", fresh_postgres_url("social")),
        f"--memory-store-url={fresh_redis_url()}",
        *github.flags(),
        f"--apple-client-id={apple.client_id}",
        f"--apple-client-secret={presigned_apple_secret(apple)}",
        f"--social-provider-urls={github.provider_url()},{apple.provider_url()}",
        "--app-cookie-secure=false",
        # both processes behind one public origin, as behind a load balancer
        f"--url={PUBLIC}",
        "--webhook-allow-private-targets",
    ]
    started: list[ServerProcess] = []
    try:
        started.append(start_server(flags, tmp, name="one"))
        started.append(start_server(flags, tmp, name="two"))
        yield started[0], started[1]
    finally:
        for server in started:
            server.terminate()


@pytest.mark.parametrize("name", ["github", "apple"])
def test_begun_on_one_process_finished_on_the_other(
    name: str,
    servers: tuple[ServerProcess, ServerProcess],
    providers: dict[str, FakeProvider],
) -> None:
    one, two = servers
    providers[name].person = person = Person(sub="424242", email=f"pg-{name}@example.com")
    with one.client() as browser:
        first = start(browser, name, redirect_uri=f"{PUBLIC}/app", state="pg")
        answer = at_provider(first.headers["location"])
        # the "load balancer" sends the browser's callback to process two, which shares
        # the database and Redis with process one
        with two.client(cookies=browser.cookies) as other:
            done = back_to_server(other, _routed_to(answer, two))
            assert done.status_code == 302, done.text
            assert done.headers["location"].startswith(f"{PUBLIC}/app?")
            back = query(done.headers["location"])
            assert back["state"] == "pg"
            assert "access_token" in back
            # the app on the public origin reads the profile (a browser sends that Origin)
            profile = other.get("/v1/profile", headers={"origin": PUBLIC}).json()
    assert profile["email"] == person.email
    assert name in profile["signup_methods"].split(",")


def _routed_to(answer: httpx.Response, server: ServerProcess) -> httpx.Response:
    """The provider's answer with our public origin routed to ``server``."""
    headers = dict(answer.headers)
    if "location" in headers:
        headers["location"] = headers["location"].replace(PUBLIC, server.url)
    return httpx.Response(
        answer.status_code,
        headers=headers,
        text=answer.text.replace(PUBLIC, server.url),
        request=answer.request,
    )


def test_meta_and_routes_follow_what_is_configured(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    one, _ = servers
    meta = httpx.get(f"{one.url}/v1/meta").json()
    enabled = {p for p in PROVIDERS if meta[f"is_{p}_login_enabled"]}
    assert enabled == {"github", "apple"}
    with one.client() as browser:
        refused = browser.get("/oauth_login/google", params={"redirect_uri": f"{PUBLIC}/app"})
    assert refused.status_code == 400
    assert refused.json()["message"] == "unknown or unconfigured provider"


def _events_for(hooks: Receiver, email: str, wanted: int) -> list[tuple[str, str]]:
    """(event, auth_recipe) of the deliveries about ``email``, once ``wanted`` arrived."""
    deadline = time.monotonic() + 60
    while True:
        found = [
            (r.json["event_name"], r.json.get("auth_recipe", ""))
            for r in hooks.received
            if r.json["user"]["email"] == email
        ]
        if len(found) >= wanted or time.monotonic() > deadline:
            return found
        hooks.wait_for(len(hooks.received) + 1, timeout=max(0.1, deadline - time.monotonic()))


def test_signup_and_login_webhooks_name_the_provider(
    servers: tuple[ServerProcess, ServerProcess], providers: dict[str, FakeProvider]
) -> None:
    one, _ = servers
    admin = {"x-service-admin-secret": ADMIN_SECRET, "origin": PUBLIC}
    providers["github"].person = person = Person(sub="777", email="hooked@example.com")
    with receiver() as hooks:
        for event in ("user.signup", "user.login"):
            added = httpx.post(
                f"{one.url}/v1/admin/add_webhook",
                json={"event_name": event, "endpoint": hooks.url, "enabled": True},
                headers=admin,
            )
            assert added.status_code == 200, added.text
        for _ in range(2):
            with one.client() as browser:
                first = start(browser, "github", redirect_uri=f"{PUBLIC}/app")
                answer = at_provider(first.headers["location"])
                done = back_to_server(browser, _routed_to(answer, one))
                assert "access_token" in query(done.headers["location"])
        events = _events_for(hooks, person.email or "", 3)
    assert sorted(events) == [
        ("user.login", "github"),
        ("user.login", "github"),
        ("user.signup", "github"),
    ]
