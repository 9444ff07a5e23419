"""Issue #28 end to end over real HTTP (SQLite; PostgreSQL + Redis) with the mail sink:
every spelling of an address reaches one account, and a password reset ends every pending
emailed link of the user (a magic link mailed before the reset no longer signs in)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import ServerProcess, base_flags, free_port, start_server
from tests.server.test_auth_flows import (
    NEW_PASSWORD,
    client_for,
    link_in,
    login,
    mails_to,
    signup,
    token_in,
)

FULLWIDTH_E = "\uff45"
CYRILLIC_ER = "\u0440"  # CYRILLIC SMALL LETTER ER, drawn as the Latin p


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, SpooledMailSink]]:
    tmp: Path = tmp_path_factory.mktemp(f"identity-{request.param}")
    if request.param == "sqlite":
        storage = base_flags("sqlite", fresh_sqlite_url(tmp, "identity"))
    else:
        storage = [
            *base_flags("postgres", fresh_postgres_url("identity")),
            f"--memory-store-url={fresh_redis_url()}",
        ]
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    try:
        process = start_server(
            [
                *storage,
                "--smtp-host=127.0.0.1",
                f"--smtp-port={sink.port}",
                "--smtp-sender-email=bastion@example.com",
                "--app-cookie-secure=false",
                "--enable-magic-link-login",
            ],
            tmp,
            name="identity",
        )
    except BaseException:
        sink.stop()
        raise
    try:
        yield process, sink
    finally:
        process.terminate()
        sink.stop()


@pytest.fixture
def client(server: tuple[ServerProcess, SpooledMailSink]) -> Iterator[httpx.Client]:
    with client_for(server[0]) as c:
        yield c


def _local() -> str:
    return f"dup-{uuid.uuid4().hex[:10]}"


def _with_subject(mails: list[EmailMessage], subject: str) -> EmailMessage:
    (mail,) = [m for m in mails if m["Subject"] == subject]
    return mail


def test_every_spelling_of_an_address_reaches_one_account(client: httpx.Client) -> None:
    local = _local()
    assert signup(client, f"{local}@example.com").status_code == 200
    for spelling in (
        f"{local}@{FULLWIDTH_E}xample.com",
        f"{local}@example.com.",
        f"{local.upper()}@EXAMPLE.COM",
    ):
        assert login(client, spelling).status_code == 200, spelling
        again = signup(client, spelling)
        assert again.status_code == 400, spelling


def test_a_cyrillic_look_alike_is_another_mailbox_and_never_the_original(
    client: httpx.Client,
) -> None:
    """Issue 36 (17), the documented choice (README, "Look-alike addresses"): a Cyrillic
    er (U+0440) makes another mailbox, so another account; it never signs into, mails or
    blocks the original."""
    original = f"{_local()}@example.com"
    look_alike = original.replace("p", CYRILLIC_ER, 1)
    assert look_alike != original
    first = signup(client, original)
    assert first.status_code == 200
    assert login(client, look_alike).status_code == 401
    second = signup(client, look_alike)
    assert second.status_code == 200, second.text
    assert second.json()["user"]["id"] != first.json()["user"]["id"]
    assert second.json()["user"]["email"] == look_alike
    assert login(client, original).json()["user"]["id"] == first.json()["user"]["id"]


@pytest.mark.parametrize("email", ["a\x00b@example.com", "ab@example.com\x07"])
@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/signup", {"password": "Str0ng!pass", "confirm_password": "Str0ng!pass"}),
        ("/v1/login", {"password": "Str0ng!pass"}),
        ("/v1/forgot_password", {}),
        ("/v1/magic_link_login", {}),
        ("/v1/resend_verify_email", {"identifier": "basic_auth_signup"}),
    ],
)
def test_control_characters_in_an_address_are_refused(
    client: httpx.Client, path: str, extra: dict[str, str], email: str
) -> None:
    response = client.post(path, json={"email": email, **extra})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_argument"


def test_control_characters_in_a_phone_number_are_refused(client: httpx.Client) -> None:
    response = client.post(
        "/v1/login", json={"phone_number": "+1555\x00123456", "password": "Str0ng!pass"}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_argument"


def test_magic_link_mailed_before_a_reset_no_longer_signs_in(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, sink = server
    email = f"{_local()}@example.com"
    assert signup(client, email).status_code == 200
    assert client.post("/v1/magic_link_login", json={"email": email}).status_code == 200
    assert client.post("/v1/forgot_password", json={"email": email}).status_code == 200
    mails = mails_to(sink, email, count=2)
    magic = link_in(_with_subject(mails, "Please verify your email")).removeprefix(process.url)
    reset_token = token_in(_with_subject(mails, "Reset Password"))
    reset = client.post(
        "/v1/reset_password",
        json={"token": reset_token, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
    )
    assert reset.status_code == 200
    landing = client.get(magic, follow_redirects=False)
    assert landing.status_code == 307
    assert "error=" in landing.headers["location"]
    assert "access_token" not in landing.headers["location"]
    assert login(client, email, NEW_PASSWORD).status_code == 200


def test_magic_link_proving_an_unverified_address_clears_the_pre_registered_password(
    tmp_path: Path,
) -> None:
    """The attacker signs up the victim's address with a password of their choosing before
    the victim ever proves it; once the victim's magic link proves it, that password no
    longer signs in and the owner sets one by reset."""
    sink = SpooledMailSink(free_port(), tmp_path / "mail")
    sink.start()
    try:
        process = start_server(
            [
                *base_flags("sqlite", fresh_sqlite_url(tmp_path, "prereg")),
                "--smtp-host=127.0.0.1",
                f"--smtp-port={sink.port}",
                "--smtp-sender-email=bastion@example.com",
                "--app-cookie-secure=false",
                "--enable-magic-link-login",
                "--enable-email-verification",
            ],
            tmp_path,
            name="prereg",
        )
        try:
            with client_for(process) as client:
                victim = f"{_local()}@example.com"
                assert signup(client, victim).status_code == 200
                assert login(client, victim).status_code != 200  # unverified
                mails_to(sink, victim)  # the signup's own mail first: the next is the link
                sent = client.post("/v1/magic_link_login", json={"email": victim})
                assert sent.status_code == 200
                mails = mails_to(sink, victim, count=2)
                magic = link_in(mails[-1]).removeprefix(process.url)
                landing = client.get(magic, follow_redirects=False)
                assert landing.status_code == 307
                assert "access_token=" in landing.headers["location"]
                assert login(client, victim).status_code == 401
        finally:
            process.terminate()
    finally:
        sink.stop()


def _graphql(client: httpx.Client, query: str, **variables: object) -> dict[str, object]:
    response = client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200
    body = response.json()
    assert "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


def test_magic_link_mailed_before_a_graphql_reset_no_longer_signs_in(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, sink = server
    email = f"{_local()}@example.com"
    assert signup(client, email).status_code == 200
    _graphql(
        client,
        "mutation($e: String!) { magic_link_login(params: {email: $e}) { message } }",
        e=email,
    )
    _graphql(
        client,
        "mutation($e: String!) { forgot_password(params: {email: $e}) { message } }",
        e=email,
    )
    mails = mails_to(sink, email, count=2)
    magic = link_in(_with_subject(mails, "Please verify your email")).removeprefix(process.url)
    _graphql(
        client,
        "mutation($t: String!, $p: String!) {"
        " reset_password(params: {token: $t, password: $p, confirm_password: $p}) { message } }",
        t=token_in(_with_subject(mails, "Reset Password")),
        p=NEW_PASSWORD,
    )
    landing = client.get(magic, follow_redirects=False)
    assert landing.status_code == 307
    assert "error=" in landing.headers["location"]
    assert "access_token" not in landing.headers["location"]


def test_magic_link_mailed_before_a_grpc_reset_no_longer_signs_in(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, sink = server
    email = f"{_local()}@example.com"
    assert signup(client, email).status_code == 200
    with grpc.insecure_channel(f"127.0.0.1:{process.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        stub.MagicLinkLogin(authorizer_pb2.MagicLinkLoginRequest(email=email), timeout=10)
        stub.ForgotPassword(authorizer_pb2.ForgotPasswordRequest(email=email), timeout=10)
        mails = mails_to(sink, email, count=2)
        reset = authorizer_pb2.ResetPasswordRequest(
            token=token_in(_with_subject(mails, "Reset Password")),
            password=NEW_PASSWORD,
            confirm_password=NEW_PASSWORD,
        )
        stub.ResetPassword(reset, timeout=10)
    magic = link_in(_with_subject(mails, "Please verify your email")).removeprefix(process.url)
    landing = client.get(magic, follow_redirects=False)
    assert landing.status_code == 307
    assert "error=" in landing.headers["location"]
    assert "access_token" not in landing.headers["location"]


def test_email_change_ends_the_links_mailed_to_the_old_address(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, sink = server
    email = f"{_local()}@example.com"
    assert signup(client, email).status_code == 200
    access = login(client, email).json()["access_token"]
    assert client.post("/v1/magic_link_login", json={"email": email}).status_code == 200
    (mail,) = mails_to(sink, email)
    changed = client.post(
        "/v1/update_profile",
        json={"email": f"{_local()}@example.com"},
        headers={"authorization": f"Bearer {access}"},
    )
    assert changed.status_code == 200, changed.text
    landing = client.get(link_in(mail).removeprefix(process.url), follow_redirects=False)
    assert landing.status_code == 307
    assert "error=" in landing.headers["location"]
    assert "access_token" not in landing.headers["location"]
