"""Issue #36 (5): behind a proxy a client no longer chooses its own address.

bastion runs behind the real haproxy, with the fleet example's ``defaults`` as written
(``option forwardfor``: haproxy adds its own ``X-Forwarded-For`` line after the one the
client sent) and ``--trusted-proxies`` naming the balancer's address alone (haproxy
connects from 127.0.0.2, the client from 127.0.0.3). A new forged header per request
no longer gives a new address: the per-address rate limit and the admin-secret guess
limit hit, and the access log names the client's real address. Directly: over HTTP every
header line counts, in order; over gRPC the one list is walked alike."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.service.access import ADMIN_SECRET_FAILURES
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.haproxy import fleet_defaults, haproxy
from tests.server.harness import ServerProcess, base_flags, running

BALANCER, CLIENT = "127.0.0.2", "127.0.0.3"


def _flags(tmp: Path, *extra: str) -> list[str]:
    own = [f for f in base_flags("sqlite", fresh_sqlite_url(tmp)) if "log-level" not in f]
    return [*own, "--log-level=info", *extra]


def _client(front: int) -> httpx.Client:
    """A client on its own loopback address, talking to the balancer."""
    transport = httpx.HTTPTransport(local_address=CLIENT)
    url = f"http://127.0.0.1:{front}"
    return httpx.Client(base_url=url, transport=transport, headers={"origin": url}, timeout=30)


@pytest.fixture
def behind_haproxy(tmp_path: Path) -> Iterator[tuple[ServerProcess, int]]:
    """bastion (a low per-address rate limit) behind the fleet example's haproxy."""
    flags = [f for f in _flags(tmp_path) if not f.startswith("--rate-limit")]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=3", f"--trusted-proxies={BALANCER}"]
    with (
        running(flags, tmp_path) as server,
        haproxy(
            [server.http_port], tmp_path / "haproxy", defaults=fleet_defaults(), source=BALANCER
        ) as front,
    ):
        yield server, front


def _access_ip(server: ServerProcess, request_id: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in server.stderr().splitlines():
            if line.startswith("{") and request_id in line:
                entry = json.loads(line)
                if entry.get("logger") == "bastion.access":
                    return str(entry["client_ip"])
        time.sleep(0.1)
    raise AssertionError(f"no access line for {request_id}")


def test_a_forged_header_per_request_shares_one_rate_limit_bucket(
    behind_haproxy: tuple[ServerProcess, int],
) -> None:
    server, front = behind_haproxy
    with _client(front) as http:
        statuses = [
            http.get("/v1/meta", headers={"x-forwarded-for": f"9.9.9.{i}"}).status_code
            for i in range(5)
        ]
        request_id = f"xff-{uuid.uuid4().hex[:8]}"
        http.get("/healthz", headers={"x-forwarded-for": "9.9.9.9", "x-request-id": request_id})
    assert statuses == [200, 200, 200, 429, 429], statuses
    assert _access_ip(server, request_id) == CLIENT


def test_a_forged_header_per_guess_still_hits_the_admin_secret_limit(tmp_path: Path) -> None:
    flags = _flags(tmp_path, f"--trusted-proxies={BALANCER}")
    with (
        running(flags, tmp_path) as server,
        haproxy(
            [server.http_port], tmp_path / "haproxy", defaults=fleet_defaults(), source=BALANCER
        ) as front,
        _client(front) as http,
    ):
        statuses = [
            http.post(
                "/v1/admin/login",
                json={"admin_secret": f"guess-{i}"},
                headers={"x-forwarded-for": f"9.9.{i}.9"},
            ).status_code
            for i in range(ADMIN_SECRET_FAILURES + 4)
        ]
    assert statuses[:ADMIN_SECRET_FAILURES] == [401] * ADMIN_SECRET_FAILURES, statuses
    assert statuses[ADMIN_SECRET_FAILURES:] == [429] * 4, statuses


# -- directly: every header line, in order -------------------------------------------------------

#: a client 203.0.113.5 behind two proxies, each of which appended a line of its own
LINES = [("x-forwarded-for", "203.0.113.5"), ("x-forwarded-for", "127.0.0.9")]


@pytest.fixture(scope="module")
def trusting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("forwarded-for")
    with running(_flags(tmp, "--trusted-proxies=127.0.0.0/8"), tmp) as server:
        yield server


def _signed_up(server: ServerProcess) -> dict[str, str]:
    password = "Forwarded!pass1"
    body = {
        "email": f"xff-{uuid.uuid4().hex[:10]}@example.com",
        "password": password,
        "confirm_password": password,
    }
    with server.client() as http:
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return {"email": body["email"], "password": password, **answer.json()}


def _ips(server: ServerProcess, access_token: str) -> set[str]:
    with server.client() as http:
        listed = http.get("/v1/sessions", headers={"authorization": f"Bearer {access_token}"})
    return {s["ip"] for s in listed.json()["sessions"]}


def test_rest_reads_every_header_line(trusting: ServerProcess) -> None:
    user = _signed_up(trusting)
    with trusting.client() as http:
        headers = [("origin", trusting.url), *LINES]
        login = http.post(
            "/v1/login",
            json={"email": user["email"], "password": user["password"]},
            headers=headers,
        )
    assert login.status_code == 200, login.text
    assert "203.0.113.5" in _ips(trusting, login.json()["access_token"])


def test_grpc_walks_the_forwarded_list_too(trusting: ServerProcess) -> None:
    """gRPC's core keeps one ``x-forwarded-for`` metadata value (the last line: the one
    the nearest proxy wrote), so a proxy in front of gRPC appends to one comma list; it
    is read as on HTTP, the client's forged left-most hop ignored."""
    user = _signed_up(trusting)
    forwarded = ("x-forwarded-for", "9.9.9.9, 203.0.113.5, 127.0.0.9")
    with grpc.insecure_channel(f"127.0.0.1:{trusting.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        login = stub.Login(
            authorizer_pb2.LoginRequest(email=user["email"], password=user["password"]),
            metadata=(forwarded,),
            timeout=10,
        )
    assert "203.0.113.5" in _ips(trusting, login.access_token)
