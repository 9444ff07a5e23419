"""A fleet: three bastion processes on PostgreSQL + Redis behind haproxy (round robin,
one public URL). The conformance suite passes through the balancer with mail, SMS and the
authorization engine's rows; and a session started through one process is refreshed,
validated and ended through the others."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conformance.test_cross_surface import SUITE_FLAGS, run_suite, totals
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.haproxy import haproxy
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    CLIENT_SECRET,
    ServerProcess,
    base_flags,
    free_port,
    start_server,
)

PASSWORD = "Fleet!pass1"


@dataclass
class Fleet:
    url: str
    members: list[ServerProcess]
    mail_port: int
    sms_port: int


def _held() -> socket.socket:
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    return placeholder


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp: Path = tmp_path_factory.mktemp("fleet")
    front = free_port()
    url = f"http://127.0.0.1:{front}"
    mail_hold, sms_hold = _held(), _held()
    mail_port, sms_port = (int(h.getsockname()[1]) for h in (mail_hold, sms_hold))
    flags = [
        *(f for f in base_flags("postgres", fresh_postgres_url("fleet")) if "rate-limit" not in f),
        f"--memory-store-url={fresh_redis_url()}",
        f"--url={url}",
        *SUITE_FLAGS,
        "--smtp-host=127.0.0.1",
        f"--smtp-port={mail_port}",
        "--smtp-sender-email=bastion@fleet.example.com",
        "--enable-magic-link-login=true",
        "--sms-account-sid=AC-fleet",
        "--sms-api-key=SK-fleet",
        "--sms-api-secret=fleet-secret",
        "--sms-sender=+15550001111",
        f"--sms-api-url=http://127.0.0.1:{sms_port}",
        "--enable-phone-verification=true",
    ]
    members: list[ServerProcess] = []
    try:
        for index in range(3):
            members.append(start_server(flags, tmp, name=f"member{index}"))
        with haproxy([m.http_port for m in members], tmp / "haproxy", port=front):
            mail_hold.close()
            sms_hold.close()
            yield Fleet(url, members, mail_port, sms_port)
    finally:
        for member in members:
            member.terminate()


def test_the_conformance_suite_passes_through_the_balancer(fleet: Fleet) -> None:
    args = [
        "--base-url",
        fleet.url,
        *(a for m in fleet.members for a in ("--grpc", f"127.0.0.1:{m.grpc_port}")),
        "--admin-secret",
        ADMIN_SECRET,
        "--client-id",
        CLIENT_ID,
        "--client-secret",
        CLIENT_SECRET,
        "--destructive",
        "--fuzz-examples",
        "0",
        "--mail-sink",
        f"127.0.0.1:{fleet.mail_port}",
        "--sms-sink",
        f"127.0.0.1:{fleet.sms_port}",
    ]
    code, output = run_suite(args)
    assert code == 0, output
    assert totals(output)[1] == 0, output
    for row in (
        "fga.model_tuples_check_list_reset",
        "mail.magic_link_login",
        "sms.phone_signup_verify_otp",
    ):
        line = next(line for line in output.splitlines() if line.startswith(row))
        assert line.split()[1:4] == ["pass", "pass", "pass"], line


def _http(member: ServerProcess, fleet: Fleet) -> httpx.Client:
    return httpx.Client(base_url=member.url, headers={"origin": fleet.url}, timeout=30)


def test_a_session_moves_between_members(fleet: Fleet) -> None:
    """Signed up through the first member, refreshed through the second, validated
    through the third, logged out through the first: refused by all three at once."""
    first, second, third = fleet.members
    email = f"fleet-{free_port()}-{id(fleet)}@fleet.example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    with _http(first, fleet) as http:
        assert http.post("/v1/signup", json=body).status_code == 200
        login = http.post(
            "/v1/login", json={"email": email, "password": PASSWORD, "scope": ["offline_access"]}
        )
    assert login.status_code == 200, login.text
    with _http(second, fleet) as http:
        refreshed = http.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": login.json()["refresh_token"],
                "client_id": CLIENT_ID,
            },
        )
    assert refreshed.status_code == 200, refreshed.text
    access = refreshed.json()["access_token"]
    check = {"token_type": "access_token", "token": access}
    with _http(third, fleet) as http:
        valid = http.post("/v1/validate_jwt_token", json=check)
    assert valid.json()["is_valid"] is True
    with _http(first, fleet) as http:
        out = http.post("/v1/logout", json={}, headers={"authorization": f"Bearer {access}"})
    assert out.status_code == 200, out.text
    for member in fleet.members:
        with _http(member, fleet) as http:
            profile = http.get("/v1/profile", headers={"authorization": f"Bearer {access}"})
            assert profile.status_code == 401, (member.url, profile.text)
