"""Passkeys on all three surfaces (issue 22, issue 26): the same ceremonies through GraphQL
(with ``authorizer-py`` 0.3.0's own documents) and gRPC (Authorizer 2.4's method names and
messages) as through REST, with the same answers and the same refusals."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from authorizer import _queries as sdk

from bastion.conformance.authenticator import SoftAuthenticator
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
    running,
    start_server,
)
from tests.server.test_auth_flows import bearer, client_for, login, signup, unique_email
from tests.server.test_auth_webhooks import _wait_for as wait_for
from tests.server.test_auth_webhooks import receiver  # noqa: F401  (a fixture)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("passkeys-surfaces")
    storage = backend_storage("sqlite", tmp, "passkeys-surfaces")
    flags = [*storage.flags, "--app-cookie-secure=false", "--enable-passkeys"]
    process = start_server(flags, tmp, name="passkeys-surfaces")
    try:
        yield process
    finally:
        process.terminate()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


def signed_in(client: httpx.Client) -> tuple[str, str]:
    email = unique_email("surface")
    assert signup(client, email).status_code == 200
    response = login(client, email)
    assert response.status_code == 200, response.text
    return email, response.json()["access_token"]


class Failure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


# -- GraphQL, with the SDK's documents -------------------------------------------------------


def graphql(
    client: httpx.Client, query: str, variables: dict[str, Any], token: str | None = None
) -> dict[str, Any]:
    headers = bearer(token) if token else None
    response = client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    body = response.json()
    if body.get("errors"):
        error = body["errors"][0]
        raise Failure(error["extensions"]["code"], error["message"])
    data: dict[str, Any] = body["data"]
    return data


class GraphQLSurface:
    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def registration_options(self, token: str) -> str:
        data = graphql(self.client, sdk.WEBAUTHN_REGISTRATION_OPTIONS, {}, token)
        options: str = data["webauthn_registration_options"]["options"]
        return options

    def registration_verify(self, token: str, credential: str) -> dict[str, Any]:
        variables = {"data": {"credential": credential, "name": "Key"}}
        data = graphql(self.client, sdk.WEBAUTHN_REGISTRATION_VERIFY, variables, token)
        answer: dict[str, Any] = data["webauthn_registration_verify"]
        return answer

    def login_options(self, email: str | None = None) -> str:
        data = graphql(self.client, sdk.WEBAUTHN_LOGIN_OPTIONS, {"email": email})
        options: str = data["webauthn_login_options"]["options"]
        return options

    def login_verify(self, credential: str) -> dict[str, Any]:
        data = graphql(self.client, sdk.WEBAUTHN_LOGIN_VERIFY, {"data": {"credential": credential}})
        answer: dict[str, Any] = data["webauthn_login_verify"]
        return answer

    def credentials(self, token: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = graphql(self.client, sdk.WEBAUTHN_CREDENTIALS, {}, token)[
            "webauthn_credentials"
        ]
        return items

    def delete(self, token: str, row_id: str) -> str:
        data = graphql(self.client, sdk.WEBAUTHN_DELETE_CREDENTIAL, {"id": row_id}, token)
        message: str = data["webauthn_delete_credential"]["message"]
        return message


# -- gRPC -----------------------------------------------------------------------------------

_GRPC_CODES = {
    grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
    grpc.StatusCode.INVALID_ARGUMENT: "invalid_argument",
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.ALREADY_EXISTS: "already_exists",
    grpc.StatusCode.FAILED_PRECONDITION: "failed_precondition",
}


class GrpcSurface:
    def __init__(self, channel: grpc.Channel) -> None:
        self.stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)

    def _call(self, method: str, request: Any, token: str | None = None) -> Any:
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        try:
            return getattr(self.stub, method)(request, metadata=metadata)
        except grpc.RpcError as error:
            raise Failure(_GRPC_CODES[error.code()], error.details()) from None

    def registration_options(self, token: str) -> str:
        request = authorizer_pb2.WebauthnRegistrationOptionsRequest()
        options: str = self._call("WebauthnRegistrationOptions", request, token).options
        return options

    def registration_verify(self, token: str, credential: str) -> dict[str, Any]:
        request = authorizer_pb2.WebauthnRegistrationVerifyRequest(
            credential=credential, name="Key"
        )
        answer = self._call("WebauthnRegistrationVerify", request, token)
        return {"message": answer.message, "user": {"email": answer.user.email}}

    def login_options(self, email: str | None = None) -> str:
        request = authorizer_pb2.WebauthnLoginOptionsRequest(email=email or "")
        options: str = self._call("WebauthnLoginOptions", request).options
        return options

    def login_verify(self, credential: str) -> dict[str, Any]:
        request = authorizer_pb2.WebauthnLoginVerifyRequest(credential=credential)
        answer = self._call("WebauthnLoginVerify", request)
        return {"access_token": answer.access_token, "user": {"email": answer.user.email}}

    def credentials(self, token: str) -> list[dict[str, Any]]:
        request = authorizer_pb2.WebauthnCredentialsRequest()
        answer = self._call("WebauthnCredentials", request, token)
        return [{"id": c.id, "name": c.name} for c in answer.webauthn_credentials]

    def delete(self, token: str, row_id: str) -> str:
        request = authorizer_pb2.WebauthnDeleteCredentialRequest(id=row_id)
        message: str = self._call("WebauthnDeleteCredential", request, token).message
        return message


Surface = GraphQLSurface | GrpcSurface


@pytest.fixture(params=["graphql", "grpc"])
def surface(
    request: pytest.FixtureRequest, server: ServerProcess, client: httpx.Client
) -> Iterator[Surface]:
    if request.param == "graphql":
        yield GraphQLSurface(client)
        return
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield GrpcSurface(channel)


def failure_of(call: Callable[[], Any]) -> Failure:
    with pytest.raises(Failure) as caught:
        call()
    return caught.value


def test_the_ceremonies_through_each_surface(
    server: ServerProcess, client: httpx.Client, surface: Surface
) -> None:
    email, token = signed_in(client)
    device = SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")
    options = surface.registration_options(token)
    registered = surface.registration_verify(token, device.create(options))
    assert registered["message"] == "Passkey registered successfully"
    assert registered["user"]["email"] == email
    [info] = surface.credentials(token)
    assert info["name"] == "Key"
    # passwordless, with a discoverable credential and with the user named
    for named in (None, email):
        signed = surface.login_verify(device.get(surface.login_options(named)))
        assert signed["access_token"]
        assert signed["user"]["email"] == email
    # a replayed challenge is refused alike
    credential = device.get(surface.login_options())
    surface.login_verify(credential)
    replayed = failure_of(lambda: surface.login_verify(credential))
    assert (replayed.code, replayed.message) == ("unauthenticated", "invalid passkey challenge")
    # user verification missing for passwordless
    unverified = device.get(surface.login_options(), uv=False)
    refused = failure_of(lambda: surface.login_verify(unverified))
    assert (refused.code, refused.message) == ("unauthenticated", "invalid passkey")
    # registering the same authenticator again
    again = device.create(surface.registration_options(token))
    taken = failure_of(lambda: surface.registration_verify(token, again))
    assert (taken.code, taken.message) == ("already_exists", "this passkey is registered already")
    assert surface.delete(token, info["id"]) == "Passkey deleted successfully"
    gone = failure_of(lambda: surface.delete(token, info["id"]))
    assert (gone.code, gone.message) == ("not_found", "passkey not found")
    assert surface.credentials(token) == []


def test_a_registration_without_user_verification_is_refused(
    server: ServerProcess, client: httpx.Client, surface: Surface
) -> None:
    """The registration options require user verification: an answer without it is
    refused (issue 36), and nothing is registered."""
    _email, token = signed_in(client)
    device = SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")
    options = surface.registration_options(token)
    assert json.loads(options)["authenticatorSelection"]["userVerification"] == "required"
    unverified = device.create(options, uv=False)
    refused = failure_of(lambda: surface.registration_verify(token, unverified))
    assert (refused.code, refused.message) == ("invalid_argument", "invalid passkey")
    assert surface.credentials(token) == []


def test_garbled_credentials_and_anonymous_callers_are_refused_alike(surface: Surface) -> None:
    garbled = failure_of(lambda: surface.login_verify("not json"))
    assert (garbled.code, garbled.message) == ("invalid_argument", "invalid passkey credential")
    anonymous = failure_of(lambda: surface.credentials(""))
    assert anonymous.code == "unauthenticated"


def test_the_admin_lists_and_deletes_a_users_passkeys_on_graphql_and_grpc(
    server: ServerProcess, client: httpx.Client
) -> None:
    _email, token = signed_in(client)
    user_id = client.get("/v1/profile", headers=bearer(token)).json()["id"]
    for _ in range(2):
        device = SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")
        surface = GraphQLSurface(client)
        surface.registration_verify(token, device.create(surface.registration_options(token)))
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    listed = client.post(
        "/graphql",
        json={
            "query": "query($p: AdminWebauthnCredentialsRequest!) "
            "{ _webauthn_credentials(params: $p) { id name } }",
            "variables": {"p": {"user_id": user_id}},
        },
        headers=admin,
    ).json()["data"]["_webauthn_credentials"]
    assert len(listed) == 2
    deleted = client.post(
        "/graphql",
        json={
            "query": "mutation($p: AdminWebauthnDeleteCredentialRequest!) "
            "{ _webauthn_delete_credential(params: $p) { message } }",
            "variables": {"p": {"user_id": user_id, "id": listed[0]["id"]}},
        },
        headers=admin,
    ).json()
    assert deleted["data"]["_webauthn_delete_credential"]["message"] == (
        "Passkey deleted successfully"
    )
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        metadata = (("x-service-admin-secret", ADMIN_SECRET),)
        answer = stub.AdminWebauthnCredentials(
            admin_pb2.AdminWebauthnCredentialsRequest(user_id=user_id), metadata=metadata
        )
        assert [c.id for c in answer.webauthn_credentials] == [listed[1]["id"]]
        stub.AdminWebauthnDeleteCredential(
            admin_pb2.AdminWebauthnDeleteCredentialRequest(user_id=user_id, id=listed[1]["id"]),
            metadata=metadata,
        )
        with pytest.raises(grpc.RpcError) as caught:
            stub.AdminWebauthnCredentials(
                admin_pb2.AdminWebauthnCredentialsRequest(user_id=user_id)
            )
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    listed = client.post("/v1/webauthn_credentials", json={}, headers=bearer(token)).json()[
        "webauthn_credentials"
    ]
    assert listed == []


def test_rename_on_graphql_and_grpc(server: ServerProcess, client: httpx.Client) -> None:
    _email, token = signed_in(client)
    device = SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")
    surface = GraphQLSurface(client)
    surface.registration_verify(token, device.create(surface.registration_options(token)))
    [info] = surface.credentials(token)
    renamed = graphql(
        client,
        "mutation($p: WebauthnRenameCredentialRequest!) "
        "{ webauthn_rename_credential(params: $p) { message } }",
        {"p": {"id": info["id"], "name": "Desk key"}},
        token,
    )
    assert renamed["webauthn_rename_credential"]["message"] == "Passkey renamed successfully"
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        stub.WebauthnRenameCredential(
            authorizer_pb2.WebauthnRenameCredentialRequest(id=info["id"], name="Travel key"),
            metadata=(("authorization", f"Bearer {token}"),),
        )
    assert [c["name"] for c in surface.credentials(token)] == ["Travel key"]
    assert json.loads(surface.login_options())["rpId"] == "127.0.0.1"


def test_webhooks_for_registration_sign_in_and_deletion(
    tmp_path: Path,
    receiver: tuple[str, list[dict[str, Any]]],  # noqa: F811  (the fixture)
) -> None:
    endpoint, received = receiver
    storage = backend_storage("sqlite", tmp_path, "passkeys-hooks")
    flags = [*storage.flags, "--enable-passkeys", "--webhook-allow-private-targets"]
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    with running(flags, tmp_path, name="hooks") as srv, client_for(srv) as client:
        for event in ("user.passkey_registered", "user.login", "user.passkey_deleted"):
            added = client.post(
                "/v1/admin/add_webhook",
                json={"event_name": event, "endpoint": endpoint, "enabled": True},
                headers=admin,
            )
            assert added.status_code == 200, added.text
        email, token = signed_in(client)
        device = SoftAuthenticator(origin=srv.url, rp_id="127.0.0.1")
        surface = GraphQLSurface(client)
        surface.registration_verify(token, device.create(surface.registration_options(token)))
        assert wait_for(received, "user.passkey_registered")["user"]["email"] == email
        received.clear()
        surface.login_verify(device.get(surface.login_options()))
        login_hook = wait_for(received, "user.login")
        assert (login_hook["user"]["email"], login_hook["auth_recipe"]) == (email, "webauthn")
        [info] = surface.credentials(token)
        surface.delete(token, info["id"])
        assert wait_for(received, "user.passkey_deleted")["user"]["email"] == email
