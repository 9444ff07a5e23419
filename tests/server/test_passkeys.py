"""Passkeys end to end over REST (issue 22): a real server, a software authenticator.

The server runs with ``--enable-passkeys`` and TOTP as the enforced-when-chosen second
factor; its rp id is the host of ``--url`` (127.0.0.1). Registration needs a fresh
sign-in; sign-in works with a discoverable credential alone, with a named user's, and as
the second factor of a password login. Every way a response can be wrong is refused:
a replayed challenge, another origin, another rp id, a counter that went back, a
passwordless sign-in without user verification, a flipped backup-eligible flag.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pyotp
import pytest
from authorizer import _queries as sdk

from bastion.conformance.authenticator import SoftAuthenticator, b64url
from bastion.core.limits import TEXT_LIMITS
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.server.harness import ADMIN_SECRET, ServerProcess, backend_storage, start_server
from tests.server.test_auth_flows import bearer, client_for, login, signup, unique_email
from tests.server.test_mfa_email import mfa_cookie, with_mfa


@dataclass
class Env:
    backend: str
    server: ServerProcess
    database_url: str


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp: Path = tmp_path_factory.mktemp(f"passkeys-{backend}")
    storage = backend_storage(backend, tmp, "passkeys")
    flags = [
        *storage.flags,
        "--app-cookie-secure=false",
        "--enable-passkeys",
        "--enable-mfa",
        "--enforce-mfa=false",
        "--enable-totp-login",
    ]
    server = start_server(flags, tmp, name="passkeys")
    try:
        yield Env(backend, server, storage.database_url)
    finally:
        server.terminate()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def authenticator(env: Env, **kwargs: Any) -> SoftAuthenticator:
    return SoftAuthenticator(origin=env.server.url, rp_id="127.0.0.1", **kwargs)


def signed_in(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    email = unique_email("passkey")
    assert signup(client, email).status_code == 200
    response = login(client, email)
    assert response.status_code == 200, response.text
    return email, response.json()


def register(
    client: httpx.Client, token: str, device: SoftAuthenticator, name: str = "Laptop"
) -> httpx.Response:
    options = client.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
    assert options.status_code == 200, options.text
    credential = device.create(options.json()["options"])
    body = {"credential": credential, "name": name}
    return client.post("/v1/webauthn_registration_verify", json=body, headers=bearer(token))


def login_options(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/webauthn_login_options", json=body, headers=body.pop("h", None))
    assert response.status_code == 200, response.text
    options: dict[str, Any] = json.loads(response.json()["options"])
    return options


def verify(client: httpx.Client, credential: str, **headers: str) -> httpx.Response:
    return client.post(
        "/v1/webauthn_login_verify", json={"credential": credential}, headers=headers or None
    )


@pytest.fixture
def registered(env: Env, client: httpx.Client) -> tuple[str, str, SoftAuthenticator]:
    email, auth = signed_in(client)
    device = authenticator(env)
    response = register(client, auth["access_token"], device)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Passkey registered successfully"
    assert response.json()["user"]["email"] == email
    return email, auth["access_token"], device


# -- registration ---------------------------------------------------------------------------


def test_registration_options_name_the_rp_and_the_user(env: Env, client: httpx.Client) -> None:
    email, auth = signed_in(client)
    response = client.post(
        "/v1/webauthn_registration_options", json={}, headers=bearer(auth["access_token"])
    )
    assert response.status_code == 200, response.text
    options = json.loads(response.json()["options"])
    assert options["rp"]["id"] == "127.0.0.1"
    assert options["user"]["name"] == email
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert options["authenticatorSelection"]["userVerification"] == "required"


def test_registration_needs_a_signed_in_caller(client: httpx.Client) -> None:
    response = client.post("/v1/webauthn_registration_options", json={})
    assert response.status_code == 401


def test_registered_passkeys_are_listed_renamed_and_excluded(
    client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, token, device = registered
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(token))
    assert listed.status_code == 200, listed.text
    [info] = listed.json()["webauthn_credentials"]
    assert info["name"] == "Laptop"
    assert set(info["transports"]) == {"internal", "hybrid"}
    assert info["last_used_at"] is None
    renamed = client.post(
        "/v1/webauthn_rename_credential",
        json={"id": info["id"], "name": "Phone"},
        headers=bearer(token),
    )
    assert renamed.status_code == 200, renamed.text
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(token)).json()
    assert listed["webauthn_credentials"][0]["name"] == "Phone"
    options = client.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
    excluded = json.loads(options.json()["options"])["excludeCredentials"]
    assert [c["id"] for c in excluded] == [b64url(device.credential_id)]


def test_one_authenticator_registers_once(
    env: Env, client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, token, device = registered
    again = register(client, token, device)
    assert again.status_code == 409, again.text
    # ... also for another account
    _other, auth = signed_in(client)
    assert register(client, auth["access_token"], device).status_code == 409


def test_registration_from_another_origin_or_rp_or_unverified_is_refused(
    env: Env, client: httpx.Client
) -> None:
    _email, auth = signed_in(client)
    token = auth["access_token"]
    wrongs: list[dict[str, Any]] = [
        {"origin": "https://evil.example"},
        {"rp_id": "evil.example"},
        {"uv": False},  # the options require user verification
    ]
    for wrong in wrongs:
        options = client.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
        credential = authenticator(env).create(options.json()["options"], **wrong)
        response = client.post(
            "/v1/webauthn_registration_verify",
            json={"credential": credential},
            headers=bearer(token),
        )
        assert response.status_code == 400, response.text
        assert response.json()["message"] == "invalid passkey"
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(token))
    assert listed.json()["webauthn_credentials"] == []


# -- passwordless sign-in -------------------------------------------------------------------


def test_passwordless_sign_in_with_a_discoverable_credential(
    env: Env, client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    email, _token, device = registered
    options = login_options(client)
    assert options["allowCredentials"] == []
    assert options["userVerification"] == "required"
    response = verify(client, device.get(json.dumps(options)))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["user"]["email"] == email
    payload = body["id_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert (claims["login_method"], claims["amr"]) == ("webauthn", ["hwk", "user"])
    profile = client.get("/v1/profile", headers=bearer(body["access_token"]))
    assert profile.status_code == 200
    assert profile.json()["email"] == email
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(body["access_token"]))
    assert listed.json()["webauthn_credentials"][0]["last_used_at"] is not None


def test_sign_in_for_a_named_user_allows_only_their_passkeys(
    env: Env, client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    email, _token, device = registered
    options = login_options(client, email=email)
    assert [c["id"] for c in options["allowCredentials"]] == [b64url(device.credential_id)]
    response = verify(client, device.get(json.dumps(login_options(client, email=email))))
    assert response.status_code == 200, response.text
    # another user's options do not allow this passkey
    _other, _auth = signed_in(client)
    stranger = login_options(client, email=_other)
    assert verify(client, device.get(json.dumps(stranger))).status_code == 401
    # an unknown address answers like one without passkeys
    unknown = login_options(client, email=unique_email("nobody"))
    assert [c["id"] for c in unknown["allowCredentials"]] == []


def test_a_replayed_challenge_is_refused(
    client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, _token, device = registered
    credential = device.get(json.dumps(login_options(client)))
    assert verify(client, credential).status_code == 200
    replayed = verify(client, credential)
    assert replayed.status_code == 401
    assert replayed.json()["message"] == "invalid passkey challenge"


@pytest.mark.parametrize(
    "wrong", [{"origin": "https://evil.example"}, {"rp_id": "evil.example"}, {"uv": False}]
)
def test_wrong_origin_rp_id_or_missing_user_verification_are_refused(
    client: httpx.Client, registered: tuple[str, str, SoftAuthenticator], wrong: dict[str, Any]
) -> None:
    _email, _token, device = registered
    response = verify(client, device.get(json.dumps(login_options(client)), **wrong))
    assert response.status_code == 401, response.text
    assert response.json()["message"] == "invalid passkey"
    # audited against the credential's owner; the challenge is spent, the passkey still
    # works with a right answer
    assert verify(client, device.get(json.dumps(login_options(client)))).status_code == 200


def test_a_counter_that_went_back_is_refused(
    client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, _token, device = registered
    assert (
        verify(client, device.get(json.dumps(login_options(client)), counter=5)).status_code == 200
    )
    for stale in (5, 4):
        response = verify(client, device.get(json.dumps(login_options(client)), counter=stale))
        assert response.status_code == 401, response.text
    assert (
        verify(client, device.get(json.dumps(login_options(client)), counter=6)).status_code == 200
    )


def test_a_changed_backup_eligibility_is_refused(
    client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, _token, device = registered
    device.backup_eligible = True
    assert verify(client, device.get(json.dumps(login_options(client)))).status_code == 401


def test_a_garbled_credential_is_a_clear_error(client: httpx.Client) -> None:
    for credential in ("", "not json", json.dumps({"response": {}})):
        response = client.post("/v1/webauthn_login_verify", json={"credential": credential})
        assert response.status_code == 400, response.text
        assert response.json()["message"] == "invalid passkey credential"


# -- the second factor ----------------------------------------------------------------------


def totp_user(client: httpx.Client) -> tuple[str, str, str]:
    """A user with MFA on and an enrolled authenticator: (email, secret, access token)."""
    email = unique_email("mfa")
    assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    first = login(client, email)
    assert first.status_code == 200, first.text
    secret = first.json()["authenticator_secret"]
    done = client.post(
        "/v1/verify_otp",
        json={"email": email, "otp": pyotp.TOTP(secret).now(), "is_totp": True},
        headers=with_mfa(mfa_cookie(first)),
    )
    assert done.status_code == 200, done.text
    return email, secret, done.json()["access_token"]


def test_a_passkey_is_the_second_factor_after_a_password(env: Env, client: httpx.Client) -> None:
    email, _secret, token = totp_user(client)
    device = authenticator(env)
    assert register(client, token, device).status_code == 200
    parked = login(client, email)
    assert parked.status_code == 200, parked.text
    assert not parked.json().get("access_token")
    cookie = with_mfa(mfa_cookie(parked))
    options = login_options(client, h=cookie)
    assert len(options["allowCredentials"]) == 1
    response = verify(client, device.get(json.dumps(options)), **cookie)
    assert response.status_code == 200, response.text
    assert response.json()["access_token"]
    # the MFA challenge is gone: neither a code nor the passkey can finish it again
    again = verify(client, device.get(json.dumps(login_options(client))), **cookie)
    assert again.status_code == 401


def test_second_factor_options_need_a_live_challenge(client: httpx.Client) -> None:
    response = client.post(
        "/v1/webauthn_login_options", json={}, headers=with_mfa("no-such-challenge")
    )
    assert response.status_code == 401
    assert response.json()["message"] == "invalid session"


# -- deleting, and the admin's view ---------------------------------------------------------


def test_delete_and_the_admin_listing(
    env: Env, client: httpx.Client, registered: tuple[str, str, SoftAuthenticator]
) -> None:
    _email, token, device = registered
    user_id = client.get("/v1/profile", headers=bearer(token)).json()["id"]
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    listed = client.post("/v1/admin/webauthn_credentials", json={"user_id": user_id}, headers=admin)
    assert listed.status_code == 200, listed.text
    [info] = listed.json()["webauthn_credentials"]
    refused = client.post("/v1/admin/webauthn_credentials", json={"user_id": user_id})
    assert refused.status_code == 401
    gone = client.post(
        "/v1/webauthn_delete_credential", json={"id": info["id"]}, headers=bearer(token)
    )
    assert gone.status_code == 200, gone.text
    again = client.post(
        "/v1/webauthn_delete_credential", json={"id": info["id"]}, headers=bearer(token)
    )
    assert again.status_code == 404
    assert verify(client, device.get(json.dumps(login_options(client)))).status_code == 401
    # an audit row for each step
    audit = client.post("/v1/admin/audit_logs", json={"resource_id": user_id}, headers=admin)
    assert audit.status_code == 200, audit.text
    actions = [row["action"] for row in audit.json()["audit_logs"]]
    assert {"user.passkey_registered", "user.passkey_deleted"} <= set(actions)


def test_disabled_by_default(tmp_path: Path) -> None:
    storage = backend_storage("sqlite", tmp_path, "passkeys-off")
    server = start_server([*storage.flags], tmp_path, name="off")
    try:
        with client_for(server) as c:
            response = c.post("/v1/webauthn_login_options", json={})
            assert response.status_code == 400, response.text
            assert response.json()["message"] == "passkeys are not enabled on this server"
    finally:
        server.terminate()


def test_concurrent_registrations_of_one_authenticator_store_it_once(
    env: Env, client: httpx.Client
) -> None:
    """Two accounts register the same authenticator at the same moment: the unique
    credential id lets exactly one through, the other is already_exists (409)."""
    device = authenticator(env)
    tokens = [signed_in(client)[1]["access_token"] for _ in range(2)]
    bodies = []
    for token in tokens:
        options = client.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
        bodies.append((token, {"credential": device.create(options.json()["options"])}))
    barrier = threading.Barrier(len(bodies))

    def submit(token: str, body: dict[str, Any]) -> int:
        with client_for(env.server) as own:
            barrier.wait()
            answer = own.post("/v1/webauthn_registration_verify", json=body, headers=bearer(token))
            return answer.status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        statuses = sorted(pool.map(lambda pair: submit(*pair), bodies))
    assert statuses == [200, 409]


def test_the_second_factor_through_graphql_and_grpc(env: Env, client: httpx.Client) -> None:
    """The same second factor, the ``mfa`` cookie carried by GraphQL and by gRPC metadata."""
    email, _secret, token = totp_user(client)
    device = authenticator(env)
    assert register(client, token, device).status_code == 200
    cookie = with_mfa(mfa_cookie(login(client, email)))
    options = client.post("/graphql", json={"query": sdk.WEBAUTHN_LOGIN_OPTIONS}, headers=cookie)
    text = options.json()["data"]["webauthn_login_options"]["options"]
    variables = {"data": {"credential": device.get(text)}}
    done = client.post(
        "/graphql",
        json={"query": sdk.WEBAUTHN_LOGIN_VERIFY, "variables": variables},
        headers=cookie,
    ).json()
    assert done["data"]["webauthn_login_verify"]["user"]["email"] == email
    assert done["data"]["webauthn_login_verify"]["access_token"]
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        cookie = with_mfa(mfa_cookie(login(client, email)))
        metadata = (("cookie", cookie["cookie"]),)
        asked = stub.WebauthnLoginOptions(
            authorizer_pb2.WebauthnLoginOptionsRequest(), metadata=metadata
        )
        assert len(json.loads(asked.options)["allowCredentials"]) == 1
        answer = stub.WebauthnLoginVerify(
            authorizer_pb2.WebauthnLoginVerifyRequest(credential=device.get(asked.options)),
            metadata=metadata,
        )
        assert answer.access_token
        assert answer.user.email == email


def test_a_name_at_its_limit_is_stored_and_past_it_refused(env: Env, client: httpx.Client) -> None:
    _email, auth = signed_in(client)
    token = auth["access_token"]
    longest = "é" * TEXT_LIMITS["name"]
    assert register(client, token, authenticator(env), name=longest).status_code == 200
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(token)).json()
    assert listed["webauthn_credentials"][0]["name"] == longest
    too_long = register(client, token, authenticator(env), name=longest + "é")
    assert too_long.status_code == 400
    assert too_long.json()["message"] == (
        f"name is longer than the limit of {TEXT_LIMITS['name']} characters"
    )
