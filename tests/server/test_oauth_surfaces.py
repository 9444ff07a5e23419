"""The authorize ``state`` binds the announced code on every surface (one service layer).

A browser without a session is sent to the login page with a code announced for its
``state``; logging in over GraphQL (``login``, ``session``) or gRPC (``Login``) with that
state binds the code to the login, and the ID token carries the request's ``nonce``.
A login with an unknown state, or none, binds nothing.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, running
from tests.server.test_auth_flows import PASSWORD, client_for, session_cookie, signup, unique_email
from tests.server.test_auth_surfaces import data, gql
from tests.server.test_oauth_flow import location, pkce


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("oauth-surfaces")
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp)), "--app-cookie-secure=false"]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as c:
        yield c


def park(server: ServerProcess, client: httpx.Client) -> tuple[str, str, str, str]:
    """/authorize without a session: (state, nonce, announced code, verifier)."""
    verifier, challenge = pkce()
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    query = {
        "client_id": CLIENT_ID,
        "redirect_uri": f"{server.url}/done",
        "response_type": "code",
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
    }
    target, params, _ = location(client.get("/authorize", params=query))
    assert target == f"{server.url}/app"
    return state, nonce, params["code"], verifier


def redeem(server: ServerProcess, code: str, verifier: str) -> httpx.Response:
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "client_id": CLIENT_ID,
        "redirect_uri": f"{server.url}/done",
    }
    return httpx.post(f"{server.url}/oauth/token", data=body)


def id_claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


LOGIN = "mutation($p: LoginRequest!) { login(params: $p) { id_token } }"
SESSION = "query($p: SessionQueryRequest) { session(params: $p) { id_token } }"


def test_graphql_login_and_session_with_the_state_bind_the_code(
    server: ServerProcess, client: httpx.Client
) -> None:
    email = unique_email("gql-state")
    assert signup(client, email).status_code == 200
    state, nonce, code, verifier = park(server, client)
    assert redeem(server, code, verifier).status_code == 400  # not bound yet
    state, nonce, code, verifier = park(server, client)
    logged = gql(client, LOGIN, p={"email": email, "password": PASSWORD, "state": state})
    assert id_claims(data(logged)["login"]["id_token"])["nonce"] == nonce
    token = redeem(server, code, verifier)
    assert token.status_code == 200, token.text
    assert id_claims(token.json()["id_token"])["email"] == email
    # session (cookie rotation) with the state of a second parked request
    state, nonce, code, verifier = park(server, client)
    rotated = gql(
        client, SESSION, {"cookie": f"cookie_session={session_cookie(logged)}"}, p={"state": state}
    )
    assert id_claims(data(rotated)["session"]["id_token"])["nonce"] == nonce
    assert redeem(server, code, verifier).status_code == 200


def test_grpc_login_with_the_state_binds_the_code_and_unknown_states_bind_nothing(
    server: ServerProcess, client: httpx.Client
) -> None:
    email = unique_email("grpc-state")
    assert signup(client, email).status_code == 200
    state, nonce, code, verifier = park(server, client)
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        other = stub.Login(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD, state="not-parked")
        )
        assert id_claims(other.id_token)["nonce"] != nonce
        assert redeem(server, code, verifier).status_code == 400
        state, nonce, code, verifier = park(server, client)
        logged = stub.Login(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD, state=state)
        )
    assert id_claims(logged.id_token)["nonce"] == nonce
    assert redeem(server, code, verifier).status_code == 200
    # single use: the state was consumed by the first login
    assert redeem(server, code, verifier).status_code == 400
