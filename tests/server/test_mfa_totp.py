"""Authenticator apps (TOTP) as the enforced second factor, end to end (issue 4).

Each backend (SQLite with the SQL-backed memory store; PostgreSQL + Redis) runs a server
with ``--enable-mfa --enable-totp-login`` and MFA enforced (the reference's default), so
every password login needs a code; codes are computed with pyotp from the secret shown
at enrolment. Steps are chosen explicitly (the enrolment's step, then the next one), so
the replay rule (a step is accepted once, and never an earlier one) is exercised exactly.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx
import pyotp
import pytest

from bastion.core.auth import totp
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.server.harness import ServerProcess, backend_storage, start_server
from tests.server.test_auth_flows import (
    PASSWORD,
    bearer,
    client_for,
    login,
    signup,
    unique_email,
)
from tests.server.test_mfa_email import set_cookies, with_mfa


@dataclass
class Env:
    backend: str
    database_url: str
    server: ServerProcess


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-totp-{backend}")
    storage = backend_storage(backend, tmp, "totp")
    url = storage.database_url
    flags = [*storage.flags, "--app-cookie-secure=false", "--enable-mfa", "--enable-totp-login"]
    server = start_server(flags, tmp, name="totp")
    try:
        yield Env(backend, url, server)
    finally:
        server.terminate()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def code_at(secret: str, step: int) -> str:
    return pyotp.TOTP(secret).at(step * totp.STEP_SECONDS)


def current_step() -> int:
    return int(time.time()) // totp.STEP_SECONDS


def challenge(client: httpx.Client, email: str) -> tuple[dict[str, Any], str]:
    response = login(client, email)
    assert response.status_code == 200, response.text
    return response.json(), set_cookies(response)["mfa"].split(";", 1)[0].split("=", 1)[1]


def verify(client: httpx.Client, email: str, code: str, cookie: str) -> httpx.Response:
    body = {"email": email, "otp": code, "is_totp": True}
    return client.post("/v1/verify_otp", json=body, headers=with_mfa(cookie))


@dataclass
class Enrolled:
    email: str
    secret: str
    recovery_codes: list[str]
    #: the step the enrolment's code was accepted for
    step: int


def enrol(client: httpx.Client) -> Enrolled:
    email = unique_email("totp")
    assert signup(client, email).status_code == 200
    body, cookie = challenge(client, email)
    secret = body["authenticator_secret"]
    step = current_step()
    done = verify(client, email, code_at(secret, step), cookie)
    assert done.status_code == 200, done.text
    return Enrolled(email, secret, body["authenticator_recovery_codes"], step)


def test_first_login_enrols_and_the_first_code_completes_it(env: Env, client: httpx.Client) -> None:
    email = unique_email("enrol")
    assert signup(client, email).status_code == 200  # MFA is enforced: no opt-in needed
    response = login(client, email)
    body = response.json()
    assert body["message"] == "Proceed to totp verification screen"
    assert body["should_show_totp_screen"] is True
    assert not body.get("access_token")
    assert base64.b64decode(body["authenticator_scanner_image"]).startswith(b"\x89PNG")
    secret = body["authenticator_secret"]
    assert len(base64.b32decode(secret)) == 20
    codes = body["authenticator_recovery_codes"]
    assert len(codes) == totp.RECOVERY_CODE_COUNT
    assert len(set(codes)) == len(codes)
    cookies = set_cookies(response)
    assert f"Max-Age={totp.TOTP_CHALLENGE_TTL}" in cookies["mfa"]
    assert "cookie_session" not in cookies
    cookie = cookies["mfa"].split(";", 1)[0].split("=", 1)[1]
    # before the enrolment is complete a recovery code proves nothing
    assert verify(client, email, codes[0], cookie).json()["message"] == "invalid otp"
    wrong = f"{(int(code_at(secret, current_step())) + 1) % 10**6:06d}"
    assert verify(client, email, wrong, cookie).json()["message"] == "invalid otp"
    done = verify(client, email, code_at(secret, current_step()), cookie)
    assert done.status_code == 200, done.text
    tokens = done.json()
    assert tokens["message"] == "OTP verified successfully."
    assert client.get("/v1/profile", headers=bearer(tokens["access_token"])).status_code == 200
    assert "cookie_session" in set_cookies(done)


def test_later_logins_ask_for_a_code_and_refuse_a_replayed_one(client: httpx.Client) -> None:
    user = enrol(client)
    body, cookie = challenge(client, user.email)
    assert body["message"] == "Proceed to totp screen"
    assert body["should_show_totp_screen"] is True
    assert body.get("authenticator_secret") is None
    assert body.get("authenticator_recovery_codes") is None
    # the enrolment's own code is spent
    spent = verify(client, user.email, code_at(user.secret, user.step), cookie)
    assert spent.json()["message"] == "invalid otp"
    next_step = code_at(user.secret, user.step + 1)
    assert verify(client, user.email, next_step, cookie).status_code == 200
    _, cookie = challenge(client, user.email)
    assert verify(client, user.email, next_step, cookie).json()["message"] == "invalid otp"
    as_email_code = client.post(
        "/v1/verify_otp",
        json={"email": user.email, "otp": code_at(user.secret, user.step + 2)},
        headers=with_mfa(cookie),
    )
    assert as_email_code.json()["message"] == "invalid otp"


def test_a_recovery_code_works_once(client: httpx.Client) -> None:
    user = enrol(client)
    _, cookie = challenge(client, user.email)
    used = user.recovery_codes[3]
    done = verify(client, user.email, used.lower(), cookie)
    assert done.status_code == 200, done.text
    assert done.json()["access_token"]
    _, cookie = challenge(client, user.email)
    assert verify(client, user.email, used, cookie).json()["message"] == "invalid otp"
    assert verify(client, user.email, user.recovery_codes[4], cookie).status_code == 200


def _stored_secrets(env: Env) -> list[str]:
    query = "SELECT secret FROM service_authenticators"
    if env.backend == "sqlite":
        with contextlib.closing(sqlite3.connect(env.database_url)) as conn:
            return [row[0] for row in conn.execute(query)]

    async def fetch() -> list[str]:
        conn = await asyncpg.connect(env.database_url)
        try:
            return [row["secret"] for row in await conn.fetch(query)]
        finally:
            await conn.close()

    return asyncio.run(fetch())


def test_secrets_are_encrypted_at_rest(env: Env, client: httpx.Client) -> None:
    user = enrol(client)
    stored = _stored_secrets(env)
    assert stored
    assert all(s.startswith("v1.") for s in stored)
    assert not any(user.secret in s for s in stored)


def test_grpc_login_carries_the_enrolment(env: Env) -> None:
    with client_for(env.server) as client:
        email = unique_email("grpc-totp")
        assert signup(client, email).status_code == 200
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer, call = stub.Login.with_call(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD)
        )
        assert answer.should_show_totp_screen
        assert not answer.access_token
        assert len(answer.authenticator_recovery_codes) == totp.RECOVERY_CODE_COUNT
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        cookie = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0]
        code = code_at(answer.authenticator_secret, current_step())
        done = stub.VerifyOtp(
            authorizer_pb2.VerifyOtpRequest(email=email, otp=code, is_totp=True),
            metadata=(("cookie", cookie),),
        )
        assert done.access_token
        assert done.user.email == email
        with pytest.raises(grpc.RpcError) as refused:
            stub.ResendOtp(
                authorizer_pb2.ResendOtpRequest(email=email), metadata=(("cookie", cookie),)
            )
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
