"""The texted one-time code as a login's second factor, end to end (issue 4).

Each backend (SQLite with the SQL-backed memory store; PostgreSQL + Redis) runs two
server processes sharing their stores, configured with ``--enable-mfa --enable-sms-otp``
(MFA optional: ``--enforce-mfa=false``) and the SMS provider flags pointing at a local
fake of the provider's Messages API (:class:`tests.fakes.twilio.FakeTwilio`), which
records what it was sent; the tests take the code out of the recorded text. Every text
goes through the transactional outbox.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import redis

from bastion.core.auth import otp
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.fakes.twilio import ACCOUNT_SID, API_KEY, API_SECRET, FakeTwilio
from tests.server.harness import ServerProcess, backend_storage, start_server
from tests.server.memory_time import MemoryEntries
from tests.server.test_auth_flows import PASSWORD, bearer, client_for, session_cookie
from tests.server.test_mfa_email import mfa_cookie, set_cookies, with_mfa

SENDER = "+15550001111"
MFA_FLAGS = ["--enable-mfa", "--enable-sms-otp", "--enforce-mfa=false"]
SMS_SENT = "Please check text message for the OTP"


def sms_flags(fake: FakeTwilio) -> list[str]:
    return [
        f"--sms-account-sid={ACCOUNT_SID}",
        f"--sms-api-key={API_KEY}",
        f"--sms-api-secret={API_SECRET}",
        f"--sms-sender={SENDER}",
        f"--sms-api-url={fake.url}",
    ]


def unique_phone() -> str:
    return f"+1555{secrets.randbelow(10**7):07d}"


def texts_to(fake: FakeTwilio, phone: str, count: int = 1, timeout: float = 30) -> list[str]:
    """The bodies of the first ``count`` texts to ``phone``, waiting for them to arrive."""
    deadline = time.monotonic() + timeout
    with fake.lock:
        while True:
            found = [m["Body"] for m in fake.messages if m["To"] == phone]
            if len(found) >= count:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"expected {count} SMS to {phone}, got {len(found)}")
            fake.lock.wait(left)


def sent_count(fake: FakeTwilio, phone: str) -> int:
    with fake.lock:
        return sum(1 for m in fake.messages if m["To"] == phone)


def code_in(body: str) -> str:
    match = re.fullmatch(r"Your verification code is: (\d{6})", body)
    assert match is not None, body
    return match.group(1)


def other_code(code: str) -> str:
    return f"{(int(code) + 1) % 10**6:06d}"


@dataclass
class Env:
    backend: str
    server: ServerProcess
    #: a second process on the same database and memory store
    other: ServerProcess
    fake: FakeTwilio
    database: str
    memory: str | None
    #: the same memory store, for tests that let time pass for one of its entries
    entries: MemoryEntries


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-sms-{backend}")
    chosen = backend_storage(backend, tmp, "mfasms")
    storage, database, memory = chosen.flags, chosen.database_url, chosen.redis_url
    started: list[ServerProcess] = []
    with FakeTwilio() as fake:
        flags = [*storage, *sms_flags(fake), "--app-cookie-secure=false", *MFA_FLAGS]
        try:
            started.append(start_server(flags, tmp, name="one"))
            started.append(start_server(flags, tmp, name="two"))
            yield Env(backend, started[0], started[1], fake, database, memory, chosen.memory())
        finally:
            for server in started:
                server.terminate()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def phone_signup(client: httpx.Client, phone: str, **extra: Any) -> httpx.Response:
    body = {"phone_number": phone, "password": PASSWORD, "confirm_password": PASSWORD, **extra}
    return client.post("/v1/signup", json=body)


def phone_login(client: httpx.Client, phone: str, password: str = PASSWORD) -> httpx.Response:
    return client.post("/v1/login", json={"phone_number": phone, "password": password})


def verify(client: httpx.Client, phone: str, code: str, cookie: str | None) -> httpx.Response:
    headers = with_mfa(cookie) if cookie is not None else None
    body = {"phone_number": phone, "otp": code}
    return client.post("/v1/verify_otp", json=body, headers=headers)


def mfa_phone_user(client: httpx.Client) -> str:
    phone = unique_phone()
    created = phone_signup(client, phone, is_multi_factor_auth_enabled=True)
    assert created.status_code == 200, created.text
    return phone


def challenged(client: httpx.Client, fake: FakeTwilio, phone: str) -> tuple[str, str]:
    """Log in with the password: the challenge's cookie and the texted code."""
    before = sent_count(fake, phone)
    response = phone_login(client, phone)
    assert response.status_code == 200, response.text
    body = texts_to(fake, phone, before + 1)[before]
    return mfa_cookie(response), code_in(body)


def stored_challenge_aged(env: Env, challenge_id: str) -> None:
    """Move a stored challenge's lifetime into the past (as if its minutes had gone by),
    keeping the stored row or key alive, so only the server's own expiry check stands."""
    key = f"mfa_challenge:{challenge_id}"

    def aged(raw: bytes) -> bytes:
        data = json.loads(raw)
        span = data["expires_at"] - data["issued_at"]
        data["expires_at"] = int(time.time()) - 1
        data["issued_at"] = data["expires_at"] - span
        return json.dumps(data).encode()

    if env.memory is not None:
        store = redis.Redis.from_url(env.memory)
        try:
            raw = store.get(key)
            assert isinstance(raw, bytes)
            assert store.set(key, aged(raw), keepttl=True)
        finally:
            store.close()
        return
    with sqlite3.connect(env.database) as db:
        (raw,) = db.execute("SELECT value FROM service_memory WHERE key = ?", (key,)).fetchone()
        db.execute("UPDATE service_memory SET value = ? WHERE key = ?", (aged(raw), key))


# -- login -------------------------------------------------------------------------------


def test_login_texts_a_code_after_the_password_and_gives_no_tokens(
    env: Env, client: httpx.Client
) -> None:
    phone = mfa_phone_user(client)
    wrong = phone_login(client, phone, password="Wr0ng!password")
    assert wrong.status_code == 401
    assert "mfa" not in set_cookies(wrong)
    response = phone_login(client, phone)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["should_show_mobile_otp_screen"] is True
    assert body["message"] == SMS_SENT
    assert not body.get("access_token")
    assert not body.get("user")
    cookies = set_cookies(response)
    assert "cookie_session" not in cookies
    assert f"Max-Age={otp.OTP_TTL}" in cookies["mfa"]
    (text,) = texts_to(env.fake, phone)  # one text: the wrong password sent nothing
    assert len(code_in(text)) == 6
    with env.fake.lock:
        (message,) = [m for m in env.fake.messages if m["To"] == phone]
    assert message["From"] == SENDER
    assert message["account_sid"] == ACCOUNT_SID


def test_the_right_code_completes_the_login_once(env: Env, client: httpx.Client) -> None:
    phone = mfa_phone_user(client)
    cookie, code = challenged(client, env.fake, phone)
    done = verify(client, phone, code, cookie)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["message"] == "OTP verified successfully."
    assert body["access_token"]
    assert body["user"]["phone_number"] == phone
    cookies = set_cookies(done)
    assert {"cookie_session", "cookie_session_domain"} <= set(cookies)
    assert "Max-Age=0" in cookies["mfa"]
    profile = client.get("/v1/profile", headers=bearer(body["access_token"]))
    assert profile.json()["phone_number"] == phone
    session = client.post(
        "/v1/session", json={}, headers={"cookie": f"cookie_session={session_cookie(done)}"}
    )
    assert session.status_code == 200
    again = verify(client, phone, code, cookie)
    assert again.status_code == 401
    assert again.json()["message"] == "invalid session"


def test_wrong_codes_get_one_message_and_exhaust_the_challenge(
    env: Env, client: httpx.Client
) -> None:
    phone = mfa_phone_user(client)
    cookie, code = challenged(client, env.fake, phone)
    assert verify(client, phone, code, None).json()["message"] == "invalid session"
    for attempt in (other_code(code), "abc", "12345", other_code(code), "000000x"):
        refused = verify(client, phone, attempt, cookie)
        assert refused.status_code == 400
        assert refused.json()["message"] == "invalid otp"
    dead = verify(client, phone, code, cookie)  # the fifth wrong code killed the challenge
    assert dead.status_code == 401
    assert dead.json()["message"] == "invalid session"


def test_text_codes_spend_the_users_one_guess_budget(env: Env, client: httpx.Client) -> None:
    """Across challenges, at most 10 wrong codes are compared per window; then even the
    right code of a new challenge waits (429), as for authenticator codes."""
    phone = mfa_phone_user(client)
    answers: Counter[int] = Counter()
    for _ in range(3):
        cookie, code = challenged(client, env.fake, phone)
        for _ in range(5):
            answers[verify(client, phone, other_code(code), cookie).status_code] += 1
    assert answers == {400: 10, 429: 5}, answers
    cookie, code = challenged(client, env.fake, phone)
    late = verify(client, phone, code, cookie)
    assert late.status_code == 429, late.text
    assert int(late.headers["retry-after"]) > 0


def test_an_expired_code_is_refused(env: Env, client: httpx.Client) -> None:
    phone = mfa_phone_user(client)
    cookie, code = challenged(client, env.fake, phone)
    stored_challenge_aged(env, cookie)
    expired = verify(client, phone, code, cookie)
    assert expired.status_code == 401
    assert expired.json()["message"] == "invalid session"
    resend = client.post("/v1/resend_otp", json={"phone_number": phone}, headers=with_mfa(cookie))
    assert resend.status_code == 401


def test_resend_texts_a_new_code_and_the_old_one_dies(env: Env, client: httpx.Client) -> None:
    phone = mfa_phone_user(client)
    cookie, old_code = challenged(client, env.fake, phone)
    body = {"phone_number": phone}
    too_soon = client.post("/v1/resend_otp", json=body, headers=with_mfa(cookie))
    assert too_soon.status_code == 429
    env.entries.age(f"mfa_challenge:{cookie}", otp.RESEND_INTERVAL)  # as if its 30 s went by
    resent = client.post("/v1/resend_otp", json=body, headers=with_mfa(cookie))
    assert resent.status_code == 200, resent.text
    assert resent.json() == {"message": "OTP has been sent. Please check your inbox"}
    new_cookie = mfa_cookie(resent)
    assert new_cookie != cookie
    new_code = code_in(texts_to(env.fake, phone, 2)[1])
    assert verify(client, phone, old_code, cookie).json()["message"] == "invalid session"
    stale = old_code if old_code != new_code else other_code(old_code)
    assert verify(client, phone, stale, new_cookie).json()["message"] == "invalid otp"
    done = verify(client, phone, new_code, new_cookie)
    assert done.status_code == 200, done.text


def test_a_challenge_begun_on_one_process_finishes_on_another(env: Env) -> None:
    with client_for(env.server) as first, client_for(env.other) as second:
        phone = mfa_phone_user(first)
        cookie, code = challenged(first, env.fake, phone)
        done = verify(second, phone, code, cookie)
        assert done.status_code == 200, done.text
        assert verify(first, phone, code, cookie).json()["message"] == "invalid session"


def test_two_concurrent_verifies_of_one_code_on_two_processes_one_wins(env: Env) -> None:
    with client_for(env.server) as first, client_for(env.other) as second:
        phone = mfa_phone_user(first)
        cookie, code = challenged(first, env.fake, phone)
        barrier = threading.Barrier(2)
        statuses: list[int] = []

        def attempt(client: httpx.Client) -> None:
            barrier.wait()
            statuses.append(verify(client, phone, code, cookie).status_code)

        threads = [threading.Thread(target=attempt, args=(c,)) for c in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [200, 401]


# -- the other surfaces ----------------------------------------------------------------------


def test_graphql_sms_login_and_verify_otp(env: Env, client: httpx.Client) -> None:
    phone = mfa_phone_user(client)
    logged = client.post(
        "/graphql",
        json={
            "query": "mutation($p: LoginRequest!) { login(params: $p) "
            "{ message should_show_mobile_otp_screen access_token } }",
            "variables": {"p": {"phone_number": phone, "password": PASSWORD}},
        },
    )
    answer = logged.json()["data"]["login"]
    assert answer == {
        "message": SMS_SENT,
        "should_show_mobile_otp_screen": True,
        "access_token": None,
    }
    cookie, code = mfa_cookie(logged), code_in(texts_to(env.fake, phone)[0])
    query = (
        "mutation($p: VerifyOTPRequest!) { verify_otp(params: $p) "
        "{ message access_token user { phone_number phone_number_verified } } }"
    )

    def verify_otp(otp_code: str) -> Any:
        variables = {"p": {"phone_number": phone, "otp": otp_code}}
        response = client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=with_mfa(cookie)
        )
        return response.json()

    wrong = verify_otp(other_code(code))
    assert wrong["errors"][0]["message"] == "invalid otp"
    assert wrong["errors"][0]["extensions"]["code"] == "invalid_argument"
    done = verify_otp(code)
    assert "errors" not in done, done
    assert done["data"]["verify_otp"]["user"] == {
        "phone_number": phone,
        "phone_number_verified": True,
    }
    assert done["data"]["verify_otp"]["access_token"]


def test_grpc_sms_login_verify_otp_and_resend_otp(env: Env) -> None:
    with client_for(env.server) as client:
        phone = mfa_phone_user(client)
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer, call = stub.Login.with_call(
            authorizer_pb2.LoginRequest(phone_number=phone, password=PASSWORD)
        )
        assert answer.should_show_mobile_otp_screen
        assert answer.message == SMS_SENT
        assert not answer.access_token
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        cookie = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0]
        code = code_in(texts_to(env.fake, phone)[0])
        metadata = (("cookie", cookie),)
        with pytest.raises(grpc.RpcError) as too_soon:
            stub.ResendOtp(authorizer_pb2.ResendOtpRequest(phone_number=phone), metadata=metadata)
        assert too_soon.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with pytest.raises(grpc.RpcError) as wrong:
            stub.VerifyOtp(
                authorizer_pb2.VerifyOtpRequest(phone_number=phone, otp=other_code(code)),
                metadata=metadata,
            )
        assert wrong.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert wrong.value.details() == "invalid otp"
        done = stub.VerifyOtp(
            authorizer_pb2.VerifyOtpRequest(phone_number=phone, otp=code), metadata=metadata
        )
        assert done.message == "OTP verified successfully."
        assert done.access_token
        assert done.user.phone_number == phone
