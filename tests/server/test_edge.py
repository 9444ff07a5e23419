"""The HTTP edge of a real server process: CSRF, CORS, client addresses, rate limits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.harness import HTTP_SERVERS, ServerProcess, base_flags, running


def _flags(tmp: Path, *extra: str) -> list[str]:
    return [*base_flags("sqlite", str(tmp / "bastion.db")), *extra]


@pytest.fixture(scope="module", params=HTTP_SERVERS)
def http_server(request: pytest.FixtureRequest) -> str:
    return f"--http-server={request.param}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, http_server: str) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("edge")
    with running(_flags(tmp, http_server), tmp) as srv:
        yield srv


@pytest.fixture(scope="module")
def strict_server(
    tmp_path_factory: pytest.TempPathFactory, http_server: str
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("edge-strict")
    flags = _flags(tmp, http_server, "--allowed-origins=https://app.example.com,*.partner.test")
    with running(flags, tmp) as srv:
        yield srv


WRONG_LOGIN = {"admin_secret": "wrong"}


def _post(
    server: ServerProcess, path: str, headers: dict[str, str], **kwargs: object
) -> httpx.Response:
    return httpx.post(server.url + path, headers=headers, **kwargs)  # type: ignore[arg-type]


def test_csrf_requires_origin_or_referer(server: ServerProcess) -> None:
    refused = _post(server, "/v1/admin/login", {}, json=WRONG_LOGIN)
    assert refused.status_code == 403
    assert refused.json() == {
        "code": "permission_denied",
        "message": "Origin or Referer header is required for state-changing requests",
    }
    by_referer = _post(
        server, "/v1/admin/login", {"referer": "https://anywhere.test/page"}, json=WRONG_LOGIN
    )
    assert by_referer.status_code == 401
    by_origin = _post(
        server, "/v1/admin/login", {"origin": "https://anywhere.test"}, json=WRONG_LOGIN
    )
    assert by_origin.status_code == 401


def test_csrf_refuses_form_posts(server: ServerProcess) -> None:
    form = _post(
        server,
        "/v1/admin/login",
        {"origin": server.url, "content-type": "text/plain"},
        content=b'{"admin_secret": "wrong"}',
    )
    assert form.status_code == 403
    assert "Content-Type: application/json" in form.json()["message"]
    ajax = _post(
        server,
        "/v1/admin/login",
        {"origin": server.url, "content-type": "text/plain", "x-requested-with": "XMLHttpRequest"},
        content=b'{"admin_secret": "wrong"}',
    )
    assert ajax.status_code == 401


def test_csrf_guards_unknown_v1_paths_before_routing(server: ServerProcess) -> None:
    assert _post(server, "/v1/not_here", {}, json={}).status_code == 403
    assert _post(server, "/v1/not_here", {"origin": server.url}, json={}).status_code == 404


@pytest.mark.parametrize(
    "path", ["/oauth/token", "/oauth/revoke", "/oauth/introspect", "/oauth_callback/github"]
)
def test_csrf_exemptions(server: ServerProcess, path: str) -> None:
    # No Origin and a form body, yet not refused as CSRF: the endpoint's own answer comes back.
    response = _post(server, path, {}, data={"a": "b"})
    assert response.status_code != 403
    assert "Origin" not in response.text


def test_gets_are_not_csrf_checked(server: ServerProcess) -> None:
    assert httpx.get(server.url + "/v1/meta").status_code == 200


def test_allowed_origins_list(strict_server: ServerProcess) -> None:
    evil = _post(
        strict_server, "/v1/admin/login", {"origin": "https://evil.example"}, json=WRONG_LOGIN
    )
    assert evil.status_code == 403
    assert evil.json()["message"] == "Origin not allowed"
    for origin in (
        "https://app.example.com",
        "https://a.partner.test",
        "https://x.y.partner.test",
        strict_server.url,
    ):
        ok = _post(strict_server, "/v1/admin/login", {"origin": origin}, json=WRONG_LOGIN)
        assert ok.status_code == 401, origin
    bare = _post(
        strict_server, "/v1/admin/login", {"origin": "https://partner.test"}, json=WRONG_LOGIN
    )
    assert bare.status_code == 403


def test_cors_preflight_and_credentials(strict_server: ServerProcess) -> None:
    preflight = httpx.options(
        strict_server.url + "/v1/admin/login",
        headers={
            "origin": "https://app.example.com",
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, x-service-admin-secret",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    assert preflight.headers["access-control-allow-credentials"] == "true"
    allowed_headers = preflight.headers["access-control-allow-headers"].lower()
    for name in (
        "authorization",
        "content-type",
        "x-authorizer-url",
        "x-authorizer-client-id",
        "x-service-admin-secret",
    ):
        assert name in allowed_headers
    assert "origin" in preflight.headers["vary"].lower()
    foreign = httpx.options(
        strict_server.url + "/v1/admin/login",
        headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
    )
    assert "access-control-allow-origin" not in foreign.headers
    simple = httpx.get(strict_server.url + "/v1/meta", headers={"origin": "https://a.partner.test"})
    assert simple.headers["access-control-allow-origin"] == "https://a.partner.test"


def test_rate_limit_keys_on_socket_peer_without_trusted_proxies(tmp_path: Path) -> None:
    flags = [f for f in _flags(tmp_path) if not f.startswith("--rate-limit")]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=3"]
    with running(flags, tmp_path) as srv:
        statuses = [
            httpx.get(srv.url + "/v1/meta", headers={"x-forwarded-for": f"10.0.0.{i}"}).status_code
            for i in range(5)
        ]
        # Forwarded-for is ignored: all five share the socket peer's bucket.
        assert statuses == [200, 200, 200, 429, 429]
        limited = httpx.get(srv.url + "/v1/meta")
        assert limited.status_code == 429
        assert limited.json() == {
            "code": "resource_exhausted",
            "message": "Too many requests. Please try again later.",
        }
        assert int(limited.headers["retry-after"]) >= 1
        # Health probes are exempt.
        assert httpx.get(srv.url + "/healthz").status_code == 200


def test_rate_limit_keys_on_forwarded_client_behind_trusted_proxy(tmp_path: Path) -> None:
    flags = [f for f in _flags(tmp_path) if not f.startswith("--rate-limit")]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=2", "--trusted-proxies=127.0.0.0/8"]
    with running(flags, tmp_path) as srv:

        def get(xff: str) -> int:
            return httpx.get(srv.url + "/v1/meta", headers={"x-forwarded-for": xff}).status_code

        assert [get("203.0.113.7") for _ in range(3)] == [200, 200, 429]
        # Another client behind the same proxy has its own bucket.
        assert get("203.0.113.8") == 200
        # A spoofed left-most hop does not matter: the right-most untrusted hop is the client.
        assert get("198.51.100.1, 203.0.113.7") == 429


def test_rate_limit_shared_by_two_server_processes(tmp_path: Path) -> None:
    flags = [f for f in _flags(tmp_path) if not f.startswith("--rate-limit")]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=4"]
    with running(flags, tmp_path, name="a") as first, running(flags, tmp_path, name="b") as second:
        statuses = [httpx.get(s.url + "/v1/meta").status_code for s in (first, second) * 3]
        assert statuses.count(200) == 4
        assert statuses[4:] == [429, 429]
