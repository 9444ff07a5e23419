"""Super-admin credentials over real HTTP: the header, the cookie, and their refusals."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running


def _flags(tmp: Path, *extra: str) -> list[str]:
    return [*base_flags("sqlite", str(tmp / "bastion.db")), *extra]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("admin")
    with running(_flags(tmp, "--admin-cookie-secure=false"), tmp) as srv:
        yield srv


def _login(client: httpx.Client, secret: str = ADMIN_SECRET) -> httpx.Response:
    return client.post("/v1/admin/login", json={"admin_secret": secret})


def test_admin_meta_needs_credentials(server: ServerProcess) -> None:
    with server.client() as client:
        anonymous = client.get("/v1/admin/meta")
        assert anonymous.status_code == 401
        assert anonymous.json() == {"code": "unauthenticated", "message": "unauthorized"}
        wrong = client.get("/v1/admin/meta", headers={"x-service-admin-secret": "nope"})
        assert wrong.status_code == 401
        ok = client.get("/v1/admin/meta", headers={"x-service-admin-secret": ADMIN_SECRET})
        assert ok.status_code == 200
        body = ok.json()
        assert body["roles"] == ["user"]
        assert body["default_roles"] == ["user"]
        assert body["protected_roles"] == []
        assert body["client_id"] == "test-client"


def test_cookie_login_session_logout(server: ServerProcess) -> None:
    with server.client() as client:
        login = _login(client)
        assert login.status_code == 200
        assert login.json() == {"message": "admin logged in successfully"}
        set_cookie = login.headers["set-cookie"]
        assert set_cookie.startswith("service-admin=")
        assert "HttpOnly" in set_cookie
        assert "SameSite=Strict" in set_cookie
        cookie = client.cookies["service-admin"]
        assert ADMIN_SECRET not in cookie
        assert client.get("/v1/admin/meta").status_code == 200

        renewed = client.get("/v1/admin/session")
        assert renewed.json() == {"message": "admin session refreshed successfully"}
        assert client.cookies["service-admin"] != cookie
        # The cookie from before the renewal is dead.
        stale = httpx.get(server.url + "/v1/admin/meta", cookies={"service-admin": cookie})
        assert stale.status_code == 401

        current = client.cookies["service-admin"]
        out = client.post("/v1/admin/logout", json={})
        assert out.json() == {"message": "admin logged out successfully"}
        assert client.get("/v1/admin/meta").status_code == 401
        replayed = httpx.get(server.url + "/v1/admin/meta", cookies={"service-admin": current})
        assert replayed.status_code == 401


def test_forged_cookie_refused(server: ServerProcess) -> None:
    with server.client() as client:
        _login(client)
        session_id, expires, mac = client.cookies["service-admin"].split(".")
        for forged in (
            f"{session_id}.{int(expires) + 3600}.{mac}",
            f"{session_id}.{expires}.{'0' * len(mac)}",
            "garbage",
        ):
            response = httpx.get(server.url + "/v1/admin/meta", cookies={"service-admin": forged})
            assert response.status_code == 401, forged


def test_wrong_secret(server: ServerProcess) -> None:
    with server.client() as client:
        response = _login(client, "not-it")
        assert response.status_code == 401
        assert response.json() == {"code": "unauthenticated", "message": "invalid admin secret"}
        assert "set-cookie" not in response.headers


def test_secure_cookie_by_default(tmp_path: Path) -> None:
    with running(_flags(tmp_path), tmp_path) as srv, srv.client() as client:
        assert "Secure" in _login(client).headers["set-cookie"]


def test_admin_login_is_throttled(tmp_path: Path) -> None:
    with running(_flags(tmp_path), tmp_path) as srv, srv.client() as client:
        # A wrong secret sent again costs no second guess: ten DIFFERENT ones spend it.
        assert [_login(client, "wrong").status_code for _ in range(3)] == [401] * 3
        statuses = [_login(client, f"wrong-{i}").status_code for i in range(11)]
        assert statuses[:9] == [401] * 9
        assert statuses[9:] == [429, 429]
        throttled = _login(client)
        assert throttled.status_code == 429
        assert throttled.json()["code"] == "resource_exhausted"
        assert int(throttled.headers["retry-after"]) >= 1


def test_header_refused_when_disabled(tmp_path: Path) -> None:
    flags = _flags(tmp_path, "--disable-admin-header-auth", "--admin-cookie-secure=false")
    with running(flags, tmp_path) as srv, srv.client() as client:
        header = client.get("/v1/admin/meta", headers={"x-service-admin-secret": ADMIN_SECRET})
        assert header.status_code == 401
        assert _login(client).status_code == 200
        assert client.get("/v1/admin/meta").status_code == 200


def test_admin_session_actions_are_audited(tmp_path: Path) -> None:
    flags = _flags(tmp_path, "--admin-cookie-secure=false")
    with running(flags, tmp_path) as srv, srv.client() as client:
        _login(client, "wrong")
        _login(client)
        client.post("/v1/admin/logout", json={})
        listed = httpx.post(
            srv.url + "/v1/admin/audit_logs",
            json={"pagination": {"limit": 100}},
            headers={"origin": srv.url, "x-service-admin-secret": ADMIN_SECRET},
        ).json()["audit_logs"]
        actions = [row["action"] for row in listed]
        for action in ("admin.login_failed", "admin.login_success", "admin.logout"):
            assert action in actions
        row = next(r for r in listed if r["action"] == "admin.login_failed")
        assert row["actor_type"] == "admin"
        assert row["ip_address"] == "127.0.0.1"
        assert '"protocol":"rest"' in row["metadata"]
