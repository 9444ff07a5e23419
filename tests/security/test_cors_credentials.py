"""A foreign site must never read or act with a user's cookies: the default
``--allowed-origins=*`` lets any origin call without credentials, and only the server's
own origin (or a listed one) with them. Each case fails if the attack works."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.conftest import (
    ADMIN_COOKIE,
    EVIL,
    SESSION_COOKIE,
    Deployment,
    admin_cookie,
    flags_for,
    set_cookie_header,
    victim,
)
from tests.server.harness import running

SESSION_QUERY = {"query": "query { session { access_token refresh_token } }"}
PROFILE_QUERY = {"query": "query { profile { email } }"}


def no_credentialed_grant(response: httpx.Response, origin: str = EVIL) -> None:
    assert response.headers.get("access-control-allow-credentials") is None
    assert response.headers.get("access-control-allow-origin") in (None, "*")
    assert response.headers.get("access-control-allow-origin") != origin


def test_the_reported_exchange_gets_no_token(deployment: Deployment) -> None:
    """POST /v1/session with the victim's cookie from a foreign page: refused."""
    user = victim(deployment)
    with deployment.http(EVIL) as http:
        answer = http.post(
            "/v1/session", json={}, headers={"cookie": f"{SESSION_COOKIE}={user.session}"}
        )
    assert answer.status_code == 403, answer.text
    assert answer.json()["code"] == "permission_denied"
    assert "access_token" not in answer.text
    assert not answer.headers.get_list("set-cookie")
    no_credentialed_grant(answer)


def test_a_foreign_preflight_gets_no_credentialed_grant(deployment: Deployment) -> None:
    with deployment.http(EVIL) as http:
        answer = http.options(
            "/v1/session",
            headers={
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
    no_credentialed_grant(answer)


COOKIE_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/session", {}),
    ("GET", "/v1/profile", None),
    ("POST", "/v1/update_profile", {"given_name": "Mallory"}),
    ("POST", "/v1/logout", {}),
    ("POST", "/graphql", SESSION_QUERY),
    ("POST", "/graphql", PROFILE_QUERY),
]


@pytest.mark.parametrize(("method", "path", "body"), COOKIE_ROUTES)
def test_every_cookie_route_refuses_a_foreign_origin(
    deployment: Deployment, method: str, path: str, body: dict[str, Any] | None
) -> None:
    user = victim(deployment)
    cookie = {"cookie": f"{SESSION_COOKIE}={user.session}"}
    with deployment.http(EVIL) as http:
        answer = http.request(method, path, json=body, headers=cookie)
    assert answer.status_code == 403, answer.text
    assert user.email not in answer.text
    assert "access_token" not in answer.text
    no_credentialed_grant(answer)
    # The same browser on the server's own pages is served, with a credentialed grant.
    with deployment.http() as http:
        own = http.request(method, path, json=body, headers=cookie)
    assert own.status_code == 200, own.text
    assert own.headers["access-control-allow-origin"] == deployment.url
    assert own.headers["access-control-allow-credentials"] == "true"


ADMIN_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/admin/session", None),
    ("GET", "/v1/admin/meta", None),
    ("POST", "/v1/admin/users", {}),
    ("POST", "/graphql", {"query": "query { _users { users { email } } }"}),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_admin_routes_refuse_a_foreign_origin_with_the_admin_cookie(
    deployment: Deployment, method: str, path: str, body: dict[str, Any] | None
) -> None:
    cookie = {"cookie": f"{ADMIN_COOKIE}={admin_cookie(deployment)}"}
    with deployment.http(EVIL) as http:
        answer = http.request(method, path, json=body, headers=cookie)
    assert answer.status_code == 403, answer.text
    no_credentialed_grant(answer)
    with deployment.http() as http:
        assert http.request(method, path, json=body, headers=cookie).status_code == 200


def test_origin_null_is_never_trusted(deployment: Deployment) -> None:
    user = victim(deployment)
    with deployment.http("null") as http:
        answer = http.post(
            "/v1/session", json={}, headers={"cookie": f"{SESSION_COOKIE}={user.session}"}
        )
        meta = http.get("/v1/meta")
    assert answer.status_code == 403
    assert answer.headers.get("access-control-allow-origin") is None
    assert meta.headers.get("access-control-allow-origin") is None


def test_a_cross_site_read_without_origin_is_refused(deployment: Deployment) -> None:
    """A cross-site subresource GET carries the cookie but no Origin: Fetch Metadata
    says where it came from."""
    user = victim(deployment)
    with httpx.Client(base_url=deployment.url) as http:
        answer = http.get(
            "/v1/profile",
            headers={"cookie": f"{SESSION_COOKIE}={user.session}", "sec-fetch-site": "cross-site"},
        )
        same_origin = http.get(
            "/v1/profile",
            headers={
                "cookie": f"{SESSION_COOKIE}={user.session}",
                "sec-fetch-site": "same-origin",
            },
        )
    assert answer.status_code == 403
    assert user.email not in answer.text
    assert same_origin.status_code == 200


@pytest.mark.parametrize(
    "content",
    [
        {"data": {"a": "b"}},  # application/x-www-form-urlencoded
        {"content": b"{}", "headers": {"content-type": "text/plain"}},
    ],
    ids=["form", "text-plain"],
)
def test_simple_form_posts_are_refused_even_from_our_own_origin(
    deployment: Deployment, content: dict[str, Any]
) -> None:
    user = victim(deployment)
    headers = {"cookie": f"{SESSION_COOKIE}={user.session}", **content.pop("headers", {})}
    with deployment.http() as http:
        answer = http.post("/v1/session", headers=headers, **content)
    assert answer.status_code == 403
    assert "access_token" not in answer.text


def test_anyone_may_call_without_cookies_and_gets_a_wildcard(deployment: Deployment) -> None:
    """``*``: a page on another site can call public endpoints and use a bearer token it
    holds, but is never granted credentials."""
    user = victim(deployment)
    with deployment.http(EVIL) as http:
        meta = http.get("/v1/meta")
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {user.access_token}"})
    assert meta.status_code == 200
    assert meta.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in meta.headers
    assert profile.status_code == 200
    assert profile.headers["access-control-allow-origin"] == "*"


def test_session_cookies_are_lax_by_default(deployment: Deployment) -> None:
    with deployment.http() as http:
        email = f"lax-{id(http)}@example.com"
        body = {"email": email, "password": "Battery!pass1", "confirm_password": "Battery!pass1"}
        answer = http.post("/v1/signup", json=body)
        admin = http.post("/v1/admin/login", json={"admin_secret": "test-admin-secret"})
    cookie = set_cookie_header(answer, SESSION_COOKIE).lower()
    assert "samesite=lax" in cookie
    assert "httponly" in cookie
    assert "samesite=strict" in set_cookie_header(admin, ADMIN_COOKIE).lower()


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def listed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """One subdomain listed: its siblings are foreign."""
    tmp: Path = tmp_path_factory.mktemp(f"listed-{request.param}")
    flags = flags_for(request.param, tmp, "--allowed-origins=https://app.example.com")
    with running(flags, tmp) as server:
        yield Deployment(server, request.param)


def test_only_the_listed_subdomain_is_trusted_with_cookies(listed: Deployment) -> None:
    user = victim(listed)
    cookie = {"cookie": f"{SESSION_COOKIE}={user.session}"}
    for sibling in ("https://evil.example.com", "https://app.example.com.evil.io"):
        with listed.http(sibling) as http:
            refused = http.post("/v1/session", json={}, headers=cookie)
            preflight = http.options(
                "/v1/session", headers={"access-control-request-method": "POST"}
            )
        assert refused.status_code == 403, (sibling, refused.text)
        no_credentialed_grant(refused, sibling)
        no_credentialed_grant(preflight, sibling)
        # Without "*" an unlisted origin gets no CORS answer at all.
        assert "access-control-allow-origin" not in refused.headers
    with listed.http("https://app.example.com") as http:
        served = http.post("/v1/session", json={}, headers=cookie)
    assert served.status_code == 200, served.text
    assert served.headers["access-control-allow-origin"] == "https://app.example.com"
    assert served.headers["access-control-allow-credentials"] == "true"
