"""The attack battery's deployments: real server processes with every security flag at
its default, on SQLite and on PostgreSQL + Redis (each test module asks for
``deployment``, which runs its tests on both). Rate limits are raised so the battery's
many requests are not throttled: throttling has tests of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running

PASSWORD = "Battery!pass1"
EVIL = "https://evil.example"
SESSION_COOKIE = "cookie_session"
ADMIN_COOKIE = "service-admin"


@dataclass
class Deployment:
    server: ServerProcess
    backend: str

    @property
    def url(self) -> str:
        return self.server.url

    def http(self, origin: str | None = None) -> httpx.Client:
        """A client keeping no cookies, sending ``origin`` (default: the server's own)."""
        headers = {"origin": origin or self.url}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, cookies=None)


def flags_for(backend: str, tmp: Path, *extra: str) -> list[str]:
    if backend == "sqlite":
        return [*base_flags("sqlite", fresh_sqlite_url(tmp, "security")), *extra]
    database = fresh_postgres_url("security")
    return [*base_flags("postgres", database), f"--memory-store-url={fresh_redis_url()}", *extra]


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    backend: str = request.param
    tmp = tmp_path_factory.mktemp(f"security-{backend}")
    with running(flags_for(backend, tmp), tmp) as server:
        yield Deployment(server, backend)


def cookie_value(response: httpx.Response, name: str) -> str:
    for header in response.headers.get_list("set-cookie"):
        key, _, rest = header.partition("=")
        if key == name:
            return rest.split(";", 1)[0]
    raise AssertionError(f"no {name} cookie in {response.headers.get_list('set-cookie')}")


def set_cookie_header(response: httpx.Response, name: str) -> str:
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{name}="):
            return header
    raise AssertionError(f"no {name} cookie set")


@dataclass
class Victim:
    email: str
    session: str
    access_token: str


def victim(deployment: Deployment) -> Victim:
    """A signed-up user and the session cookie its browser holds."""
    email = f"victim-{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    with deployment.http() as http:
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return Victim(email, cookie_value(answer, SESSION_COOKIE), answer.json()["access_token"])


def admin_cookie(deployment: Deployment) -> str:
    with deployment.http() as http:
        answer = http.post("/v1/admin/login", json={"admin_secret": ADMIN_SECRET})
    assert answer.status_code == 200, answer.text
    return cookie_value(answer, ADMIN_COOKIE)
