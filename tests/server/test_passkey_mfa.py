"""A passkey as the second factor a login is parked for (issue 22), on a server enforcing
MFA with an authenticator app as its only code method: a user whose only factor is a
passkey is not shown a new QR code; the parked answer offers the passkey
(``should_offer_webauthn_mfa_verify``) on REST, GraphQL and gRPC; no code finishes it,
the passkey does. Meta's ``is_webauthn_enabled`` follows ``--enable-passkeys``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pyotp
import pytest

from bastion.conformance.authenticator import SoftAuthenticator
from bastion.transports.grpc.proto.authorizer.v1 import (
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from tests.server.harness import ServerProcess, backend_storage, running, start_server
from tests.server.test_auth_flows import PASSWORD, bearer, client_for, login, signup, unique_email
from tests.server.test_mfa_email import mfa_cookie, with_mfa

PARKED = "Proceed to mfa verification"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("passkey-mfa")
    storage = backend_storage("sqlite", tmp, "passkey-mfa")
    flags = [
        *storage.flags,
        "--app-cookie-secure=false",
        "--enable-passkeys",
        "--enable-mfa",
        "--enforce-mfa",
        "--enable-totp-login",
    ]
    process = start_server(flags, tmp, name="passkey-mfa")
    try:
        yield process
    finally:
        process.terminate()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


def passkey_user(server: ServerProcess, client: httpx.Client) -> tuple[str, SoftAuthenticator]:
    """A new user whose only second factor is a passkey, registered right after signup."""
    email = unique_email("passkey-mfa")
    created = signup(client, email)
    assert created.status_code == 200, created.text
    token = created.json()["access_token"]
    assert token, created.text
    device = SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")
    options = client.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
    assert options.status_code == 200, options.text
    credential = device.create(options.json()["options"])
    registered = client.post(
        "/v1/webauthn_registration_verify",
        json={"credential": credential, "name": "Laptop"},
        headers=bearer(token),
    )
    assert registered.status_code == 200, registered.text
    return email, device


def finish_with_passkey(
    client: httpx.Client, device: SoftAuthenticator, cookie: dict[str, str]
) -> httpx.Response:
    options = client.post("/v1/webauthn_login_options", json={}, headers=cookie)
    assert options.status_code == 200, options.text
    text = options.json()["options"]
    assert len(json.loads(text)["allowCredentials"]) == 1
    return client.post(
        "/v1/webauthn_login_verify", json={"credential": device.get(text)}, headers=cookie
    )


def test_a_passkey_only_user_is_parked_for_the_passkey_not_a_new_authenticator(
    server: ServerProcess, client: httpx.Client
) -> None:
    email, device = passkey_user(server, client)
    parked = login(client, email)
    assert parked.status_code == 200, parked.text
    body = parked.json()
    assert body["message"] == PARKED
    assert body["should_offer_webauthn_mfa_verify"] is True
    assert body["should_show_totp_screen"] is False
    assert not body.get("authenticator_secret")
    assert not body.get("authenticator_scanner_image")
    assert not body.get("access_token")
    cookie = with_mfa(mfa_cookie(parked))

    # No code finishes it, whatever its kind; nothing to resend.
    for is_totp in (True, False):
        tried = client.post(
            "/v1/verify_otp",
            json={"email": email, "otp": "123456", "is_totp": is_totp},
            headers=cookie,
        )
        assert tried.status_code == 400, tried.text
        assert tried.json()["message"] == "invalid otp"
    resend = client.post("/v1/resend_otp", json={"email": email}, headers=cookie)
    assert resend.status_code == 400, resend.text

    done = finish_with_passkey(client, device, cookie)
    assert done.status_code == 200, done.text
    assert done.json()["access_token"]
    assert done.json()["user"]["email"] == email
    profile = client.get("/v1/profile", headers=bearer(done.json()["access_token"]))
    assert profile.status_code == 200, profile.text


def test_without_a_passkey_the_first_login_still_enrols_the_app(client: httpx.Client) -> None:
    email = unique_email("app-mfa")
    assert signup(client, email).status_code == 200
    first = login(client, email)
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["should_show_totp_screen"] is True
    assert body["authenticator_secret"]
    assert body["should_offer_webauthn_mfa_verify"] is False
    done = client.post(
        "/v1/verify_otp",
        json={
            "email": email,
            "otp": pyotp.TOTP(body["authenticator_secret"]).now(),
            "is_totp": True,
        },
        headers=with_mfa(mfa_cookie(first)),
    )
    assert done.status_code == 200, done.text


def test_the_offer_on_graphql_and_grpc(server: ServerProcess, client: httpx.Client) -> None:
    email, device = passkey_user(server, client)
    query = (
        "mutation($p: LoginRequest!) { login(params: $p) "
        "{ message should_offer_webauthn_mfa_verify should_show_totp_screen access_token } }"
    )
    variables = {"p": {"email": email, "password": PASSWORD}}
    answer = client.post("/graphql", json={"query": query, "variables": variables})
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["login"] == {
        "message": PARKED,
        "should_offer_webauthn_mfa_verify": True,
        "should_show_totp_screen": False,
        "access_token": None,
    }
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        parked, call = stub.Login.with_call(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD)
        )
        assert (parked.message, parked.should_offer_webauthn_mfa_verify) == (PARKED, True)
        assert not parked.access_token
        cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
        value = next(c for c in cookies if c.startswith("mfa=")).split(";", 1)[0].split("=", 1)[1]
    done = finish_with_passkey(client, device, with_mfa(value))
    assert done.status_code == 200, done.text


def meta_flags(server: ServerProcess) -> tuple[Any, Any, Any]:
    with client_for(server) as c:
        rest = c.get("/v1/meta").json()["is_webauthn_enabled"]
        graphql = c.post("/graphql", json={"query": "{ meta { is_webauthn_enabled } }"}).json()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer = stub.Meta(authorizer_pb2.MetaRequest())
    assert isinstance(answer, types_pb2.Meta)
    return rest, graphql["data"]["meta"]["is_webauthn_enabled"], answer.is_webauthn_enabled


def test_meta_says_whether_passkeys_are_on(server: ServerProcess, tmp_path: Path) -> None:
    assert meta_flags(server) == (True, True, True)
    storage = backend_storage("sqlite", tmp_path, "passkeys-off-meta")
    with running([*storage.flags], tmp_path, name="off") as off:
        assert meta_flags(off) == (False, False, False)
