"""MFA enrolment end to end (Authorizer's newer API): ``totp_mfa_setup``, ``skip_mfa_setup``
and ``lock_mfa`` from a parked login, their audit rows and webhook events, the lock's
refusal on every surface and an admin's ``reset_mfa`` ending it.

Each backend (SQLite; PostgreSQL with Redis, so migration 0008 runs on both) runs one
server with authenticator apps as the only factor (``--enable-totp-login``, MFA offered:
``--enforce-mfa=false``), so no code can be sent and locking is allowed. The emailed and
texted setups run in ``test_authorizer_py_sdk.py`` and the conformance rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pyotp
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.server.harness import ADMIN_SECRET, ServerProcess, backend_storage, start_server
from tests.server.test_auth_flows import PASSWORD, client_for, login, signup, unique_email
from tests.server.test_mfa_email import mfa_cookie, with_mfa
from tests.webhook_receiver import Receiver

ADMIN = {"x-authorizer-admin-secret": ADMIN_SECRET}
EVENTS = ("user.mfa_enrolled", "user.mfa_setup_skipped", "user.mfa_locked")
LOGIN_LOCKED = (
    "your account's multi-factor authentication is locked; "
    "contact your administrator to regain access"
)


@dataclass(frozen=True)
class Env:
    server: ServerProcess
    hooks: Receiver


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-setup-{backend}")
    flags = [
        *backend_storage(backend, tmp, "mfasetup").flags,
        "--app-cookie-secure=false",
        "--enable-mfa",
        "--enable-totp-login",
        "--enforce-mfa=false",
        "--webhook-allow-private-targets",
    ]
    server = start_server(flags, tmp, name="mfasetup")
    hooks = Receiver()
    try:
        with hooks.running(), client_for(server) as client:
            for event in EVENTS:
                added = client.post(
                    "/v1/admin/add_webhook",
                    json={"event_name": event, "endpoint": hooks.url, "enabled": True},
                    headers=ADMIN,
                )
                assert added.status_code == 200, added.text
            yield Env(server, hooks)
    finally:
        server.terminate()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def parked(client: httpx.Client) -> tuple[str, str, dict[str, Any]]:
    """A new user with MFA on, logged in by password: (email, mfa cookie, login answer)."""
    email = unique_email("setup")
    assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    answer = login(client, email)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["access_token"] is None
    assert body["should_show_totp_screen"] is True
    # no code can be sent here, so none is offered
    assert body["should_offer_email_otp_mfa_setup"] is False
    assert body["should_offer_sms_otp_mfa_setup"] is False
    return email, mfa_cookie(answer), body


def admin_user(client: httpx.Client, email: str) -> dict[str, Any]:
    found = client.post("/v1/admin/user", json={"email": email}, headers=ADMIN)
    assert found.status_code == 200, found.text
    user: dict[str, Any] = found.json()
    return user


def audit_actions(client: httpx.Client, user_id: str) -> list[str]:
    listed = client.post(
        "/v1/admin/audit_logs",
        json={"resource": f"user:{user_id}", "pagination": {"limit": 100}},
        headers=ADMIN,
    )
    assert listed.status_code == 200, listed.text
    return [row["action"] for row in listed.json()["audit_logs"]]


def event_for(env: Env, email: str, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for received in list(env.hooks.received):
            body = received.json
            if body.get("event_name") == name and body.get("user", {}).get("email") == email:
                return dict(body)
        time.sleep(0.1)
    raise AssertionError(f"no {name} event for {email}")


def test_totp_setup_enrols_the_app_once_its_code_passes(env: Env, client: httpx.Client) -> None:
    email, cookie, _ = parked(client)
    shown = client.post("/v1/totp_mfa_setup", json={"email": email}, headers=with_mfa(cookie))
    assert shown.status_code == 200, shown.text
    enrolment = shown.json()
    assert enrolment["should_show_totp_screen"] is True
    assert enrolment["authenticator_scanner_image"]
    # the parked challenge ended with the setup
    again = client.post("/v1/totp_mfa_setup", json={"email": email}, headers=with_mfa(cookie))
    assert again.status_code == 401, again.text
    assert admin_user(client, email)["enrolled_mfa_methods"] == []
    code = pyotp.TOTP(enrolment["authenticator_secret"]).now()
    done = client.post(
        "/v1/verify_otp",
        json={"email": email, "otp": code, "is_totp": True},
        headers=with_mfa(mfa_cookie(shown)),
    )
    assert done.status_code == 200, done.text
    assert done.json()["user"]["enrolled_mfa_methods"] == ["totp"]
    user = admin_user(client, email)
    assert user["enrolled_mfa_methods"] == ["totp"]
    assert "user.mfa_enrolled" in audit_actions(client, user["id"])
    assert event_for(env, email, "user.mfa_enrolled")["auth_recipe"] == "totp"


def test_skipping_signs_in_and_later_logins_ask_no_code(env: Env, client: httpx.Client) -> None:
    email, cookie, _ = parked(client)
    skipped = client.post("/v1/skip_mfa_setup", json={"email": email}, headers=with_mfa(cookie))
    assert skipped.status_code == 200, skipped.text
    body = skipped.json()
    assert body["access_token"]
    assert body["user"]["has_skipped_mfa_setup_at"] is not None
    later = login(client, email)
    assert later.json()["access_token"], later.text
    user = admin_user(client, email)
    assert {"user.mfa_setup_skipped", "user.login_success"} <= set(
        audit_actions(client, user["id"])
    )
    assert event_for(env, email, "user.mfa_setup_skipped")["user"]["id"] == user["id"]


def test_a_lock_refuses_every_surface_until_an_admin_resets_mfa(
    env: Env, client: httpx.Client
) -> None:
    email, cookie, _ = parked(client)
    locked = client.post("/v1/lock_mfa", json={"email": email}, headers=with_mfa(cookie))
    assert locked.status_code == 200, locked.text
    assert "mfa=;" in locked.headers.get("set-cookie", "").replace('mfa="";', "mfa=;")
    refused = login(client, email)
    assert refused.json() == {"code": "failed_precondition", "message": LOGIN_LOCKED}
    graphql = client.post(
        "/graphql",
        json={
            "query": "mutation($p: LoginRequest!) { login(params: $p) { access_token } }",
            "variables": {"p": {"email": email, "password": PASSWORD}},
        },
    )
    error = graphql.json()["errors"][0]
    assert (error["extensions"]["code"], error["message"]) == ("failed_precondition", LOGIN_LOCKED)
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Login(authorizer_pb2.LoginRequest(email=email, password=PASSWORD))
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert raised.value.details() == LOGIN_LOCKED
    user = admin_user(client, email)
    assert user["mfa_locked_at"] is not None
    assert "user.mfa_locked" in audit_actions(client, user["id"])
    assert event_for(env, email, "user.mfa_locked")["auth_recipe"] == "totp"
    reset = client.post(
        "/v1/admin/update_user", json={"id": user["id"], "reset_mfa": True}, headers=ADMIN
    )
    assert reset.status_code == 200, reset.text
    assert reset.json()["mfa_locked_at"] is None
    assert login(client, email).json()["should_show_totp_screen"] is True


def test_setup_continues_only_the_parked_login_it_names(client: httpx.Client) -> None:
    email, cookie, _ = parked(client)
    for path in ("/v1/totp_mfa_setup", "/v1/skip_mfa_setup", "/v1/lock_mfa"):
        no_cookie = client.post(path, json={"email": email})
        assert no_cookie.json() == {"code": "unauthenticated", "message": "invalid session"}
        other = client.post(path, json={"email": unique_email()}, headers=with_mfa(cookie))
        assert other.json() == {"code": "unauthenticated", "message": "invalid session"}
        nobody = client.post(path, json={}, headers=with_mfa(cookie))
        assert nobody.json()["code"] == "invalid_argument"
    # no code can be sent on this server
    emailed = client.post(
        "/v1/email_otp_mfa_setup", json={"email": email}, headers=with_mfa(cookie)
    )
    assert emailed.json()["code"] == "failed_precondition"
