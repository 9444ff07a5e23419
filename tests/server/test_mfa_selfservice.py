"""A user's own MFA settings through update_profile, the admin's authenticator reset, and
the MFA outcome events (issue 4, reference §6.9 / §6.11), end to end.

Each backend (SQLite with the SQL-backed memory store; PostgreSQL + Redis) runs a server
with authenticator apps as the (optional) second factor. "Fresh" second factor, as
``core.auth.mfa_settings`` defines it: a session completed by ``verify_otp`` less than 5
minutes ago, or a code in the request. To test the second kind, a test makes the
session's freshness mark run out through the memory store (``tests.server.memory_time``).
Codes are computed with pyotp; within one test at most the enrolment's step and the next
one are used (both are valid without waiting), recovery codes for everything else.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pyotp
import pytest

from bastion.core.auth import otp, totp
from bastion.core.auth.mfa_settings import FACTOR_REQUIRED
from bastion.core.auth.otp import USER_GUESS_BUDGET
from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
)
from tests.server.harness import (
    ADMIN_SECRET,
    ServerProcess,
    backend_storage,
    start_server,
)
from tests.server.memory_time import MemoryEntries
from tests.server.test_auth_flows import bearer, client_for, login, signup, unique_email
from tests.server.test_mfa_email import mfa_cookie, with_mfa
from tests.webhook_receiver import Receiver

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
MFA_EVENTS = ("user.mfa_challenge_issued", "user.mfa_passed", "user.mfa_failed", "user.mfa_reset")


@dataclass
class Env:
    backend: str
    server: ServerProcess
    memory: MemoryEntries
    hooks: Receiver


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"mfa-self-{backend}")
    storage = backend_storage(backend, tmp, "mfaself")
    memory = storage.memory()
    flags = [
        *storage.flags,
        "--app-cookie-secure=false",
        "--enable-mfa",
        "--enable-totp-login",
        "--enforce-mfa=false",
        "--webhook-allow-private-targets",
    ]
    server = start_server(flags, tmp, name="mfaself")
    hooks = Receiver()
    try:
        with hooks.running(), client_for(server) as client:
            for event in MFA_EVENTS:
                added = client.post(
                    "/v1/admin/add_webhook",
                    json={"event_name": event, "endpoint": hooks.url, "enabled": True},
                    headers=ADMIN,
                )
                assert added.status_code == 200, added.text
            yield Env(backend, server, memory, hooks)
    finally:
        server.terminate()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def code_at(secret: str, step: int) -> str:
    return pyotp.TOTP(secret).at(step * totp.STEP_SECONDS)


def verify(client: httpx.Client, email: str, code: str, cookie: str) -> httpx.Response:
    body = {"email": email, "otp": code, "is_totp": True}
    return client.post("/v1/verify_otp", json=body, headers=with_mfa(cookie))


@dataclass
class Enrolled:
    email: str
    user_id: str
    secret: str
    recovery_codes: list[str]
    step: int
    access_token: str


def enrol(client: httpx.Client) -> Enrolled:
    email = unique_email("self")
    assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    challenged = login(client, email)
    body = challenged.json()
    assert body["message"] == "Proceed to totp verification screen", body
    step = int(time.time()) // totp.STEP_SECONDS
    done = verify(
        client, email, code_at(body["authenticator_secret"], step), mfa_cookie(challenged)
    )
    assert done.status_code == 200, done.text
    tokens = done.json()
    return Enrolled(
        email,
        tokens["user"]["id"],
        body["authenticator_secret"],
        body["authenticator_recovery_codes"],
        step,
        tokens["access_token"],
    )


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def no_longer_fresh(env: Env, user: Enrolled) -> None:
    """Five minutes pass for the session's "just passed a second factor" mark."""
    env.memory.expire(f"mfa_fresh:{claims(user.access_token)['sid']}")


def update(client: httpx.Client, token: str, **body: Any) -> httpx.Response:
    return client.post("/v1/update_profile", json=body, headers=bearer(token))


def login_answer(client: httpx.Client, email: str) -> dict[str, Any]:
    response = login(client, email)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def audit_actions(client: httpx.Client, user_id: str) -> list[str]:
    listed = client.post(
        "/v1/admin/audit_logs",
        json={"resource": f"user:{user_id}", "pagination": {"limit": 100}},
        headers=ADMIN,
    )
    assert listed.status_code == 200, listed.text
    return [row["action"] for row in listed.json()["audit_logs"]]


def events_for(env: Env, email: str, wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The webhook deliveries about ``email``, by event name, once all ``wanted`` came."""
    deadline = time.monotonic() + 60
    while True:
        found = {
            r.json["event_name"]: r.json
            for r in list(env.hooks.received)
            if r.json.get("user", {}).get("email") == email
        }
        if wanted <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# -- self-service -----------------------------------------------------------------------------


def test_a_session_just_completed_by_a_second_factor_turns_mfa_off(
    env: Env, client: httpx.Client
) -> None:
    user = enrol(client)
    done = update(client, user.access_token, is_multi_factor_auth_enabled=False)
    assert done.status_code == 200, done.text
    assert done.json() == {"message": "Profile details updated successfully."}
    profile = client.get("/v1/profile", headers=bearer(user.access_token)).json()
    assert profile["is_multi_factor_auth_enabled"] is False
    assert login_answer(client, user.email)["access_token"]  # the password alone now
    # the authenticator went with it: turning MFA on again enrols a new one
    assert update(client, user.access_token, is_multi_factor_auth_enabled=True).status_code == 200
    again = login_answer(client, user.email)
    assert again["message"] == "Proceed to totp verification screen"
    assert again["authenticator_secret"] != user.secret
    assert {"user.mfa_disabled", "user.mfa_enabled"} <= set(audit_actions(client, user.user_id))


def test_later_turning_mfa_off_needs_a_code_in_the_request(env: Env, client: httpx.Client) -> None:
    user = enrol(client)
    no_longer_fresh(env, user)
    missing = update(client, user.access_token, is_multi_factor_auth_enabled=False)
    assert missing.status_code == 400
    assert missing.json() == {"code": "invalid_argument", "message": FACTOR_REQUIRED}
    wrong_code = f"{(int(code_at(user.secret, user.step + 1)) + 1) % 10**6:06d}"
    for wrong in (wrong_code, code_at(user.secret, user.step), "not-a-code"):  # step is spent
        refused = update(client, user.access_token, is_multi_factor_auth_enabled=False, otp=wrong)
        assert refused.status_code == 400
        assert refused.json()["message"] == "invalid otp"
    still = client.get("/v1/profile", headers=bearer(user.access_token)).json()
    assert still["is_multi_factor_auth_enabled"] is True
    done = update(
        client,
        user.access_token,
        is_multi_factor_auth_enabled=False,
        otp=code_at(user.secret, user.step + 1),
    )
    assert done.status_code == 200, done.text
    assert login_answer(client, user.email)["access_token"]


def test_regenerated_recovery_codes_replace_the_old_ones(env: Env, client: httpx.Client) -> None:
    user = enrol(client)
    no_longer_fresh(env, user)
    done = update(
        client, user.access_token, regenerate_recovery_codes=True, otp=user.recovery_codes[0]
    )
    assert done.status_code == 200, done.text
    fresh_codes = done.json()["authenticator_recovery_codes"]
    assert len(fresh_codes) == totp.RECOVERY_CODE_COUNT
    assert not set(fresh_codes) & set(user.recovery_codes)
    # the code that proved the request is spent, and so is every other old one
    spent = update(
        client, user.access_token, regenerate_recovery_codes=True, otp=user.recovery_codes[0]
    )
    assert spent.json()["message"] == "invalid otp"
    challenged = login(client, user.email)
    cookie = mfa_cookie(challenged)
    assert verify(client, user.email, user.recovery_codes[1], cookie).json()["message"] == (
        "invalid otp"
    )
    assert verify(client, user.email, fresh_codes[0], cookie).status_code == 200
    assert "user.recovery_codes_regenerated" in audit_actions(client, user.user_id)


def test_a_user_turns_mfa_on_and_the_next_login_enrols(client: httpx.Client) -> None:
    email = unique_email("opt-in")
    assert signup(client, email).status_code == 200
    tokens = login_answer(client, email)
    assert tokens["access_token"]
    done = update(client, tokens["access_token"], is_multi_factor_auth_enabled=True)
    assert done.status_code == 200, done.text
    answer = login_answer(client, email)
    assert answer["should_show_totp_screen"] is True
    assert answer.get("access_token") is None
    assert len(answer["authenticator_recovery_codes"]) == totp.RECOVERY_CODE_COUNT


def test_wrong_factors_are_limited_per_user(env: Env, client: httpx.Client) -> None:
    user = enrol(client)
    no_longer_fresh(env, user)
    for _ in range(USER_GUESS_BUDGET):
        refused = update(client, user.access_token, regenerate_recovery_codes=True, otp="000000")
        assert refused.json()["message"] == "invalid otp"
    blocked = update(
        client, user.access_token, regenerate_recovery_codes=True, otp=user.recovery_codes[0]
    )
    assert blocked.status_code == 429
    assert blocked.json()["code"] == "resource_exhausted"
    # one budget for every second factor: the login challenge is refused too, before any
    # code is compared (so the recovery code is not consumed)
    cookie = mfa_cookie(login(client, user.email))
    refused_login = verify(client, user.email, user.recovery_codes[0], cookie)
    assert refused_login.status_code == 429
    assert refused_login.headers["retry-after"] == str(15 * 60)
    # the guess limit says so (not "too many codes requested": that is the resend limit)
    assert refused_login.json()["message"] == "too many wrong codes, please try again later"


def test_refusals(client: httpx.Client) -> None:
    email = unique_email("plain")
    assert signup(client, email).status_code == 200
    token = login_answer(client, email)["access_token"]
    nothing = update(client, token, regenerate_recovery_codes=True, otp="123456")
    assert nothing.status_code == 400
    assert nothing.json() == {
        "code": "failed_precondition",
        "message": "no authenticator app is enrolled",
    }
    both = update(client, token, regenerate_recovery_codes=True, is_multi_factor_auth_enabled=False)
    assert both.status_code == 400
    assert both.json()["code"] == "invalid_argument"
    anonymous = client.post("/v1/update_profile", json={"regenerate_recovery_codes": True})
    assert anonymous.status_code == 401


def test_graphql_regenerates_and_grpc_turns_mfa_off(env: Env, client: httpx.Client) -> None:
    user = enrol(client)
    no_longer_fresh(env, user)
    response = client.post(
        "/graphql",
        json={
            "query": "mutation($p: UpdateProfileRequest!) { update_profile(params: $p) "
            "{ message authenticator_recovery_codes } }",
            "variables": {"p": {"regenerate_recovery_codes": True, "otp": user.recovery_codes[0]}},
        },
        headers=bearer(user.access_token),
    )
    answer = response.json()
    assert "errors" not in answer, answer
    codes = answer["data"]["update_profile"]["authenticator_recovery_codes"]
    assert len(codes) == totp.RECOVERY_CODE_COUNT
    metadata = (("authorization", f"Bearer {user.access_token}"),)
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as missing:
            stub.UpdateProfile(
                authorizer_pb2.UpdateProfileRequest(is_multi_factor_auth_enabled=False),
                metadata=metadata,
            )
        assert missing.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert missing.value.details() == FACTOR_REQUIRED
        done = stub.UpdateProfile(
            authorizer_pb2.UpdateProfileRequest(is_multi_factor_auth_enabled=False, otp=codes[0]),
            metadata=metadata,
        )
        assert done.message == "Profile details updated successfully."
        assert not done.authenticator_recovery_codes
    assert login_answer(client, user.email)["access_token"]


# -- the admin's reset ------------------------------------------------------------------------


def test_admin_reset_removes_the_authenticator_and_the_next_login_enrols(
    env: Env, client: httpx.Client
) -> None:
    user = enrol(client)
    reset = client.post(
        "/v1/admin/update_user", json={"id": user.user_id, "reset_mfa": True}, headers=ADMIN
    )
    assert reset.status_code == 200, reset.text
    assert reset.json()["is_multi_factor_auth_enabled"] is True  # still on: it enrols again
    # the reset ended the user's sessions
    assert client.get("/v1/profile", headers=bearer(user.access_token)).status_code == 401
    answer = login_answer(client, user.email)
    assert answer["message"] == "Proceed to totp verification screen"
    assert answer["authenticator_secret"] != user.secret
    actions = audit_actions(client, user.user_id)
    assert {"admin.mfa_reset", "admin.user_updated"} <= set(actions)
    event = events_for(env, user.email, {"user.mfa_reset"})["user.mfa_reset"]
    assert event["user"]["id"] == user.user_id


def test_admin_reset_through_graphql_and_grpc(env: Env, client: httpx.Client) -> None:
    first, second = enrol(client), enrol(client)
    response = client.post(
        "/graphql",
        json={
            "query": "mutation($p: UpdateUserRequest!) { _update_user(params: $p) { id } }",
            "variables": {"p": {"id": first.user_id, "reset_mfa": True}},
        },
        headers=ADMIN,
    )
    assert "errors" not in response.json(), response.json()
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        done = stub.UpdateUser(
            admin_pb2.UpdateUserRequest(id=second.user_id, reset_mfa=True),
            metadata=(("x-service-admin-secret", ADMIN_SECRET),),
        )
        assert done.user.id == second.user_id
    for user in (first, second):
        assert login_answer(client, user.email)["message"] == "Proceed to totp verification screen"


# -- outcome events -------------------------------------------------------------------------


def test_challenge_outcomes_are_audited_and_sent_to_webhooks(
    env: Env, client: httpx.Client
) -> None:
    user = enrol(client)  # issued, passed
    challenged = login(client, user.email)
    assert verify(client, user.email, "000000", mfa_cookie(challenged)).status_code == 400
    events = events_for(env, user.email, set(MFA_EVENTS) - {"user.mfa_reset"})
    for name in ("user.mfa_challenge_issued", "user.mfa_passed", "user.mfa_failed"):
        assert events[name]["auth_recipe"] == "totp", name
        assert events[name]["user"]["id"] == user.user_id
    actions = audit_actions(client, user.user_id)
    for action in ("user.mfa_challenge_issued", "user.mfa_passed", "user.mfa_failed"):
        assert action in actions


# -- limits of an authenticator challenge -----------------------------------------------------


def test_a_dead_or_expired_totp_challenge_spends_no_recovery_code(
    env: Env, client: httpx.Client
) -> None:
    user = enrol(client)
    cookie = mfa_cookie(login(client, user.email))
    for _ in range(otp.MAX_ATTEMPTS):
        assert verify(client, user.email, "000000", cookie).json()["message"] == "invalid otp"
    dead = verify(client, user.email, user.recovery_codes[0], cookie)
    assert dead.status_code == 401
    assert dead.json()["message"] == "invalid session"
    cookie = mfa_cookie(login(client, user.email))
    env.memory.expire(f"mfa_challenge:{cookie}")
    late = verify(client, user.email, user.recovery_codes[0], cookie)
    assert late.json()["message"] == "invalid session"
    cookie = mfa_cookie(login(client, user.email))
    assert verify(client, user.email, user.recovery_codes[0], cookie).status_code == 200
