"""The emailed one-time code as a login's second factor, end to end (issue 4).

Each backend (SQLite with the SQL-backed memory store; PostgreSQL + Redis) runs a server
with ``--enable-mfa --enable-email-otp`` (MFA optional: ``--enforce-mfa=false``) and real
SMTP into a :class:`~tests.mailsink.SpooledMailSink`; the tests take the code out of the
mail. A second process shares the stores, so a challenge begun on one process is finished
on the other.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.core.auth import otp
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.mailsink import SpooledMailSink
from tests.server.harness import ServerProcess, backend_storage, free_port, start_server
from tests.server.memory_time import MemoryEntries
from tests.server.test_auth_flows import (
    PASSWORD,
    bearer,
    client_for,
    login,
    mail_flags,
    mails_to,
    session_cookie,
    signup,
    unique_email,
)

MFA_FLAGS = ["--enable-mfa", "--enable-email-otp", "--enforce-mfa=false"]


@dataclass
class Env:
    backend: str
    server: ServerProcess
    #: a second process on the same database and memory store
    other: ServerProcess
    sink: SpooledMailSink
    memory: MemoryEntries


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-email-{backend}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    storage = backend_storage(backend, tmp, "mfa")
    flags = [
        *storage.flags,
        *mail_flags(sink),
        "--app-cookie-secure=false",
        *MFA_FLAGS,
    ]
    started: list[ServerProcess] = []
    try:
        started.append(start_server(flags, tmp, name="one"))
        started.append(start_server(flags, tmp, name="two"))
        yield Env(backend, started[0], started[1], sink, storage.memory())
    finally:
        for server in started:
            server.terminate()
        sink.stop()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def code_in(mail: EmailMessage) -> str:
    body = mail.get_body(preferencelist=("html", "plain"))
    assert body is not None
    match = re.search(r"<b>(\d{6})</b>", body.get_content()) or re.search(
        r"\b(\d{6})\b", body.get_content()
    )
    assert match is not None, body.get_content()
    return match.group(1)


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """Set-Cookie headers by cookie name."""
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


def mfa_cookie(response: httpx.Response) -> str:
    return set_cookies(response)["mfa"].split(";", 1)[0].split("=", 1)[1]


def with_mfa(value: str) -> dict[str, str]:
    return {"cookie": f"mfa={value}"}


def mfa_user(client: httpx.Client) -> str:
    email = unique_email("mfa")
    created = signup(client, email, is_multi_factor_auth_enabled=True)
    assert created.status_code == 200, created.text
    return email


def challenged(client: httpx.Client, sink: SpooledMailSink, email: str) -> tuple[str, str]:
    """Log in with the password: the challenge's cookie and the mailed code."""
    before = len(mails_to(sink, email, 0))
    response = login(client, email)
    assert response.status_code == 200, response.text
    mail = mails_to(sink, email, before + 1)[before]
    return mfa_cookie(response), code_in(mail)


def verify(client: httpx.Client, email: str, code: str, cookie: str | None) -> httpx.Response:
    headers = with_mfa(cookie) if cookie is not None else None
    return client.post("/v1/verify_otp", json={"email": email, "otp": code}, headers=headers)


def test_login_with_mfa_on_mails_a_code_and_gives_no_tokens(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    response = login(client, email)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["should_show_email_otp_screen"] is True
    assert body["message"] == "Please check email inbox for the OTP"
    assert not body.get("access_token")
    assert not body.get("user")
    cookies = set_cookies(response)
    assert "cookie_session" not in cookies
    assert f"Max-Age={otp.OTP_TTL}" in cookies["mfa"]
    assert "HttpOnly" in cookies["mfa"]
    assert f"Max-Age={otp.OTP_TTL}" in cookies["mfa_domain"]
    (mail,) = mails_to(env.sink, email)
    assert mail["Subject"] == "OTP for your multi factor authentication"
    assert len(code_in(mail)) == 6


def test_a_user_without_mfa_logs_in_with_the_password_alone(client: httpx.Client) -> None:
    email = unique_email("plain")
    assert signup(client, email).status_code == 200
    body = login(client, email).json()
    assert body["message"] == "Logged in successfully"
    assert body["access_token"]


def test_the_right_code_completes_the_login_once(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    cookie, code = challenged(client, env.sink, email)
    done = verify(client, email, code, cookie)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["message"] == "OTP verified successfully."
    assert body["access_token"]
    assert body["id_token"]
    assert body["user"]["email"] == email
    cookies = set_cookies(done)
    assert {"cookie_session", "cookie_session_domain"} <= set(cookies)
    assert "Max-Age=0" in cookies["mfa"]
    profile = client.get("/v1/profile", headers=bearer(body["access_token"]))
    assert profile.json()["email"] == email
    session = client.post(
        "/v1/session", json={}, headers={"cookie": f"cookie_session={session_cookie(done)}"}
    )
    assert session.status_code == 200
    again = verify(client, email, code, cookie)
    assert again.status_code == 401
    assert again.json()["message"] == "invalid session"


def test_wrong_codes_get_one_message_and_exhaust_the_challenge(
    env: Env, client: httpx.Client
) -> None:
    email = mfa_user(client)
    cookie, code = challenged(client, env.sink, email)
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    for attempt in (wrong, "abc", "12345", wrong):
        refused = verify(client, email, attempt, cookie)
        assert refused.status_code == 400
        assert refused.json()["message"] == "invalid otp"
    assert verify(client, email, wrong, cookie).json()["message"] == "invalid otp"
    # the fifth wrong code killed the challenge: the right one is now too late
    dead = verify(client, email, code, cookie)
    assert dead.status_code == 401
    assert dead.json()["message"] == "invalid session"


def test_the_challenge_is_checked_before_the_code(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    cookie, code = challenged(client, env.sink, email)
    assert verify(client, email, code, None).json()["message"] == "invalid session"
    assert verify(client, email, code, "no-such-challenge").json()["message"] == "invalid session"
    other = verify(client, unique_email("other"), code, cookie)
    assert other.status_code == 401
    assert other.json()["message"] == "invalid session"
    # none of that consumed anything
    assert verify(client, email, code, cookie).status_code == 200


def test_resend_sends_a_new_code_and_the_old_one_dies(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    cookie, old_code = challenged(client, env.sink, email)
    body = {"email": email}
    too_soon = client.post("/v1/resend_otp", json=body, headers=with_mfa(cookie))
    assert too_soon.status_code == 429
    env.memory.age(f"mfa_challenge:{cookie}", otp.RESEND_INTERVAL)  # as if its 30 s went by
    resent = client.post("/v1/resend_otp", json=body, headers=with_mfa(cookie))
    assert resent.status_code == 200, resent.text
    assert resent.json() == {"message": "OTP has been sent. Please check your inbox"}
    new_cookie = mfa_cookie(resent)
    assert new_cookie != cookie
    mails = mails_to(env.sink, email, 2)
    new_code = code_in(mails[1])
    assert verify(client, email, old_code, cookie).json()["message"] == "invalid session"
    stale = old_code if old_code != new_code else f"{(int(old_code) + 1) % 10**6:06d}"
    assert verify(client, email, stale, new_cookie).json()["message"] == "invalid otp"
    done = verify(client, email, new_code, new_cookie)
    assert done.status_code == 200, done.text
    assert done.json()["access_token"]


def test_a_challenge_begun_on_one_process_finishes_on_another(env: Env) -> None:
    with client_for(env.server) as first, client_for(env.other) as second:
        email = mfa_user(first)
        cookie, code = challenged(first, env.sink, email)
        done = verify(second, email, code, cookie)
        assert done.status_code == 200, done.text
        assert verify(first, email, code, cookie).json()["message"] == "invalid session"


def test_two_concurrent_verifies_of_one_code_on_two_processes_one_wins(env: Env) -> None:
    with client_for(env.server) as first, client_for(env.other) as second:
        email = mfa_user(first)
        cookie, code = challenged(first, env.sink, email)
        barrier = threading.Barrier(2)
        statuses: list[int] = []

        def attempt(client: httpx.Client) -> None:
            barrier.wait()
            statuses.append(verify(client, email, code, cookie).status_code)

        threads = [threading.Thread(target=attempt, args=(c,)) for c in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses) == [200, 401]


def mfa_metric(server: ServerProcess, outcome: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics").text
    line = f'bastion_mfa_challenges_total{{method="email_otp",outcome="{outcome}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].rsplit(" ", 1)[1]) if found else 0.0


def test_challenges_are_counted(env: Env, client: httpx.Client) -> None:
    before = {o: mfa_metric(env.server, o) for o in ("issued", "passed", "failed")}
    email = mfa_user(client)
    cookie, code = challenged(client, env.sink, email)
    assert verify(client, email, f"{(int(code) + 1) % 10**6:06d}", cookie).status_code == 400
    assert verify(client, email, code, cookie).status_code == 200
    for outcome in ("issued", "passed", "failed"):
        assert mfa_metric(env.server, outcome) >= before[outcome] + 1


def gql(client: httpx.Client, query: str, headers: dict[str, str], **variables: Any) -> Any:
    response = client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200
    return response


def test_graphql_verify_otp(env: Env, client: httpx.Client) -> None:
    email = mfa_user(client)
    logged = gql(
        client,
        "mutation($p: LoginRequest!) { login(params: $p) "
        "{ message should_show_email_otp_screen access_token } }",
        {},
        p={"email": email, "password": PASSWORD},
    )
    answer = logged.json()["data"]["login"]
    assert answer["should_show_email_otp_screen"] is True
    assert answer["access_token"] is None
    cookie = mfa_cookie(logged)
    code = code_in(mails_to(env.sink, email)[0])
    query = (
        "mutation($p: VerifyOTPRequest!) { verify_otp(params: $p) "
        "{ message access_token user { email } } }"
    )
    other = f"{(int(code) + 1) % 10**6:06d}"
    wrong = gql(client, query, with_mfa(cookie), p={"email": email, "otp": other}).json()
    assert wrong["errors"][0]["message"] == "invalid otp"
    done = gql(client, query, with_mfa(cookie), p={"email": email, "otp": code}).json()
    assert "errors" not in done, done
    assert done["data"]["verify_otp"]["user"]["email"] == email
    assert done["data"]["verify_otp"]["access_token"]
    resend = gql(
        client,
        "mutation($p: ResendOTPRequest!) { resend_otp(params: $p) { message } }",
        with_mfa(cookie),
        p={"email": email},
    ).json()
    assert resend["errors"][0]["message"] == "invalid session"


def test_grpc_verify_otp_and_resend_otp(env: Env) -> None:
    with client_for(env.server) as client:
        email = mfa_user(client)
    channel = grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}")
    with channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer, call = stub.Login.with_call(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD)
        )
        assert answer.should_show_email_otp_screen
        assert not answer.access_token
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        cookie = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0]
        code = code_in(mails_to(env.sink, email)[0])
        metadata = (("cookie", cookie),)
        with pytest.raises(grpc.RpcError) as too_soon:
            stub.ResendOtp(authorizer_pb2.ResendOtpRequest(email=email), metadata=metadata)
        assert too_soon.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        done = stub.VerifyOtp(
            authorizer_pb2.VerifyOtpRequest(email=email, otp=code), metadata=metadata
        )
        assert done.message == "OTP verified successfully."
        assert done.access_token
        assert done.user.email == email
        with pytest.raises(grpc.RpcError) as again:
            stub.VerifyOtp(
                authorizer_pb2.VerifyOtpRequest(email=email, otp=code), metadata=metadata
            )
        assert again.value.code() == grpc.StatusCode.UNAUTHENTICATED
