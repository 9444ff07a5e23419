"""The limits of an emailed-code challenge, end to end: its lifetime, the resend interval
and cap, and the attempts (issue 4; ``core.auth.otp`` documents the numbers).

Lifetimes are not shortened for tests (no flag allows it): a test ends ONE challenge's
lifetime through the memory store, as the passing of its TTL would, and ages a stored
challenge by the resend interval instead of sleeping (``tests.server.memory_time``).
Runs on SQLite with the SQL-backed memory store and on PostgreSQL + Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bastion.core.auth import otp
from tests.mailsink import SpooledMailSink
from tests.server.harness import ServerProcess, backend_storage, free_port, start_server
from tests.server.memory_time import MemoryEntries
from tests.server.test_auth_flows import PASSWORD, client_for, mail_flags, mails_to
from tests.server.test_mfa_email import (
    MFA_FLAGS,
    challenged,
    code_in,
    mfa_cookie,
    mfa_user,
    set_cookies,
    verify,
    with_mfa,
)


@dataclass
class Env:
    server: ServerProcess
    sink: SpooledMailSink
    memory: MemoryEntries


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-limits-{backend}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    storage = backend_storage(backend, tmp, "limits")
    memory = storage.memory()
    flags = [*storage.flags, *mail_flags(sink), "--app-cookie-secure=false", *MFA_FLAGS]
    try:
        server = start_server(flags, tmp, name="limits")
    except BaseException:
        sink.stop()
        raise
    try:
        yield Env(server, sink, memory)
    finally:
        server.terminate()
        sink.stop()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def challenge_key(cookie: str) -> str:
    return f"mfa_challenge:{cookie}"


def resend(client: httpx.Client, email: str, cookie: str) -> httpx.Response:
    return client.post("/v1/resend_otp", json={"email": email}, headers=with_mfa(cookie))


def test_the_challenge_lives_its_documented_lifetime(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    response = client.post("/v1/login", json={"email": email, "password": PASSWORD})
    cookie = mfa_cookie(response)
    assert f"Max-Age={otp.OTP_TTL}" in set_cookies(response)["mfa"]
    stored = env.memory.read_json(challenge_key(cookie))
    assert stored["expires_at"] - stored["issued_at"] == otp.OTP_TTL
    code = code_in(mails_to(env.sink, email)[0])
    env.memory.expire(challenge_key(cookie))
    late = verify(client, email, code, cookie)
    assert late.status_code == 401
    assert late.json() == {"code": "unauthenticated", "message": "invalid session"}
    assert resend(client, email, cookie).json()["message"] == "invalid session"


def test_resends_are_spaced_and_capped(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    cookie, _ = challenged(client, env.sink, email)
    too_soon = resend(client, email, cookie)
    assert too_soon.status_code == 429
    assert too_soon.json()["message"] == "please wait before requesting another code"
    for sent in range(2, otp.MAX_SENDS + 1):
        env.memory.age(challenge_key(cookie), otp.RESEND_INTERVAL)
        again = resend(client, email, cookie)
        assert again.status_code == 200, again.text
        old, cookie = cookie, mfa_cookie(again)
        assert not env.memory.exists(challenge_key(old))  # the old code died with it
        assert len(mails_to(env.sink, email, sent)) == sent
    env.memory.age(challenge_key(cookie), otp.RESEND_INTERVAL)
    capped = resend(client, email, cookie)
    assert capped.status_code == 429
    assert capped.json()["message"] == "too many codes requested, please log in again"
    # the refusal took nothing away: the last code still completes the login
    latest = code_in(mails_to(env.sink, email, otp.MAX_SENDS)[otp.MAX_SENDS - 1])
    assert verify(client, email, latest, cookie).status_code == 200


def test_the_last_allowed_wrong_code_ends_the_challenge(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    cookie, code = challenged(client, env.sink, email)
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    for _ in range(otp.MAX_ATTEMPTS - 1):
        assert verify(client, email, wrong, cookie).json()["message"] == "invalid otp"
    assert env.memory.exists(challenge_key(cookie))
    assert verify(client, email, wrong, cookie).json()["message"] == "invalid otp"
    assert not env.memory.exists(challenge_key(cookie))
    dead = verify(client, email, code, cookie)
    assert dead.status_code == 401
    assert dead.json()["message"] == "invalid session"
    # a new login starts over with a new challenge and code
    cookie, code = challenged(client, env.sink, email)
    assert verify(client, email, code, cookie).status_code == 200
