"""GraphQL and gRPC run the authentication operations as REST does (one service layer).

One server; a user signs up on one surface and is served on the others: the same
messages, the same user, tokens minted on one surface accepted on the next, cookies as
real ``Set-Cookie`` headers (GraphQL) and ``set-cookie`` metadata (gRPC), and the same
errors under each surface's own error table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import HTTP_SERVERS, ServerProcess, base_flags, running
from tests.server.test_auth_flows import (
    PASSWORD,
    bearer,
    client_for,
    login,
    session_cookie,
    signup,
    unique_email,
    validate,
    with_cookie,
)

USER_FIELDS = "id email email_verified roles given_name signup_methods app_data"
AUTH_FIELDS = f"message access_token id_token refresh_token expires_in user {{ {USER_FIELDS} }}"


@pytest.fixture(scope="module", params=HTTP_SERVERS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("auth-surfaces")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp)),
        "--app-cookie-secure=false",
        f"--http-server={request.param}",
    ]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


@pytest.fixture
def stub(server: ServerProcess) -> Iterator[authorizer_pb2_grpc.AuthorizerServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield authorizer_pb2_grpc.AuthorizerServiceStub(channel)


def gql(
    client: httpx.Client, query: str, headers: dict[str, str] | None = None, **variables: Any
) -> httpx.Response:
    response = client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200
    return response


def data(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert "errors" not in body, body
    result: dict[str, Any] = body["data"]
    return result


def error(response: httpx.Response) -> tuple[str, str]:
    (first,) = response.json()["errors"]
    return first["extensions"]["code"], first["message"]


def as_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def test_graphql_signup_login_profile_session_logout(client: httpx.Client) -> None:
    email = unique_email("gql")
    created = gql(
        client,
        f"mutation($p: SignUpRequest!) {{ signup(params: $p) {{ {AUTH_FIELDS} }} }}",
        p={
            "email": email,
            "password": PASSWORD,
            "confirm_password": PASSWORD,
            "given_name": "Gee",
            "app_data": {"plan": "pro"},
        },
    )
    signed = data(created)["signup"]
    assert signed["message"] == "Signed up successfully."
    assert signed["id_token"] is None
    assert signed["user"]["app_data"] == {"plan": "pro"}
    cookie = session_cookie(created)
    # the same user over REST
    rest_profile = client.get("/v1/profile", headers=bearer(signed["access_token"])).json()
    assert rest_profile["id"] == signed["user"]["id"]
    logged = data(
        gql(
            client,
            f"mutation($p: LoginRequest!) {{ login(params: $p) {{ {AUTH_FIELDS} }} }}",
            p={"email": email, "password": PASSWORD},
        )
    )["login"]
    assert logged["message"] == "Logged in successfully"
    profile = data(
        gql(client, f"{{ profile {{ {USER_FIELDS} }} }}", bearer(logged["access_token"]))
    )
    assert profile["profile"]["email"] == email
    rotated = gql(client, f"{{ session {{ {AUTH_FIELDS} }} }}", with_cookie(cookie))
    assert data(rotated)["session"]["message"] == "Session token refreshed"
    assert session_cookie(rotated) != cookie
    no_cookie = gql(client, f"{{ session {{ {AUTH_FIELDS} }} }}", bearer(logged["access_token"]))
    assert error(no_cookie) == ("unauthenticated", "unauthorized")
    checked = data(
        gql(
            client,
            "query($p: ValidateJWTTokenRequest!) { validate_jwt_token(params: $p) "
            "{ is_valid claims } }",
            p={"token_type": "access_token", "token": logged["access_token"]},
        )
    )["validate_jwt_token"]
    assert checked["is_valid"] is True
    assert checked["claims"]["sub"] == signed["user"]["id"]
    out = data(gql(client, "mutation { logout { message } }", bearer(logged["access_token"])))
    assert out == {"logout": {"message": "Logged out successfully"}}
    assert validate(client, logged["access_token"]).status_code == 401
    wrong = gql(
        client,
        "mutation($p: LoginRequest!) { login(params: $p) { message } }",
        p={"email": email, "password": "Wr0ng!password"},
    )
    assert error(wrong)[1] == "invalid credentials"


def test_grpc_parity(client: httpx.Client, stub: authorizer_pb2_grpc.AuthorizerServiceStub) -> None:
    email = unique_email("grpc")
    created, call = stub.Signup.with_call(
        authorizer_pb2.SignupRequest(email=email, password=PASSWORD, confirm_password=PASSWORD)
    )
    assert created.message == "Signed up successfully."
    cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
    assert any(c.startswith("cookie_session=") and "HttpOnly" in c for c in cookies)
    tokens = stub.Login(
        authorizer_pb2.LoginRequest(email=email, password=PASSWORD, scope=["offline_access"])
    )
    assert tokens.message == "Logged in successfully"
    assert tokens.refresh_token
    auth = (("authorization", f"Bearer {tokens.access_token}"),)
    profile = stub.Profile(authorizer_pb2.ProfileRequest(), metadata=auth)
    assert profile.email == email
    assert profile.id == created.user.id
    rest = client.get("/v1/profile", headers=bearer(tokens.access_token)).json()
    assert as_dict(profile)["id"] == rest["id"]
    checked = stub.ValidateJwtToken(
        authorizer_pb2.ValidateJwtTokenRequest(token_type="access_token", token=tokens.access_token)
    )
    assert checked.is_valid
    assert as_dict(checked)["claims"]["value"]["sub"] == profile.id
    updated = stub.UpdateProfile(
        authorizer_pb2.UpdateProfileRequest(given_name="Rpc"), metadata=auth
    )
    assert updated.message == "Profile details updated successfully."
    assert login(client, email).json()["user"]["given_name"] == "Rpc"
    session_value = next(c for c in cookies if c.startswith("cookie_session=")).split(";")[0]
    rotated = stub.Session(authorizer_pb2.SessionRequest(), metadata=(("cookie", session_value),))
    assert rotated.message == "Session token refreshed"
    with pytest.raises(grpc.RpcError) as refused:
        stub.Session(authorizer_pb2.SessionRequest(), metadata=auth)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    revoked = stub.Revoke(authorizer_pb2.RevokeRequest(refresh_token=tokens.refresh_token))
    assert revoked.message == "Token revoked"
    # revoking the refresh token ended its whole session, access token included
    with pytest.raises(grpc.RpcError) as gone:
        stub.Profile(authorizer_pb2.ProfileRequest(), metadata=auth)
    assert gone.value.code() == grpc.StatusCode.UNAUTHENTICATED
    fresh = stub.Login(authorizer_pb2.LoginRequest(email=email, password=PASSWORD))
    out = stub.Logout(
        authorizer_pb2.LogoutRequest(),
        metadata=(("authorization", f"Bearer {fresh.access_token}"),),
    )
    assert out.message == "Logged out successfully"
    assert validate(client, fresh.access_token).status_code == 401
    with pytest.raises(grpc.RpcError) as duplicate:
        stub.Signup(
            authorizer_pb2.SignupRequest(email=email, password=PASSWORD, confirm_password=PASSWORD)
        )
    assert duplicate.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert duplicate.value.details() == "user with given email already exists"
    assert signup(client, email).json()["message"] == duplicate.value.details()
