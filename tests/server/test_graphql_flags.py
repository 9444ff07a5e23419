"""The ``--graphql-*`` flags and the client headers of ``/graphql``, over real HTTP.

One server runs with tight limits and introspection off; every limit is tried at its
boundary (accepted) and one past it (refused with Authorizer's message).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, running

MAX_BODY = 2_000_000  # larger than the 1 MiB every other route accepts
PASSWORD = "Str0ng-Passw0rd!"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("graphql-flags")
    flags = [
        *base_flags("sqlite", str(tmp / "bastion.db")),
        "--app-cookie-secure=false",
        "--graphql-max-depth=2",
        "--graphql-max-aliases=2",
        "--graphql-max-complexity=4",
        f"--graphql-max-body-bytes={MAX_BODY}",
        "--enable-graphql-introspection=false",
        "--enable-playground=false",
    ]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def _gql(client: httpx.Client, query: str, **kwargs: Any) -> dict[str, Any]:
    response = client.post("/graphql", json={"query": query, **kwargs})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def _refused(body: dict[str, Any], message: str) -> None:
    assert body["data"] is None
    assert [e["message"] for e in body["errors"]] == [message]
    assert body["errors"][0]["extensions"]["code"] == "invalid_argument"


def test_depth(client: httpx.Client) -> None:
    assert _gql(client, "{ meta { client_id } }") == {"data": {"meta": {"client_id": CLIENT_ID}}}
    too_deep = _gql(client, "{ session { user { id } } }")
    _refused(too_deep, "query depth 3 exceeds maximum allowed depth 2")


def test_aliases(client: httpx.Client) -> None:
    two = _gql(client, "{ a: meta { client_id } b: meta { client_id } }")
    assert two == {"data": {"a": {"client_id": CLIENT_ID}, "b": {"client_id": CLIENT_ID}}}
    three = _gql(client, "{ a: meta { client_id } b: meta { client_id } c: meta { version } }")
    _refused(three, "query uses 3 aliases, exceeds maximum 2")


def test_complexity(client: httpx.Client) -> None:
    four = _gql(client, "{ meta { client_id version is_sign_up_enabled } }")
    assert four["data"]["meta"]["client_id"] == CLIENT_ID
    five = _gql(
        client, "{ meta { client_id version is_sign_up_enabled is_strong_password_enabled } }"
    )
    _refused(five, "operation has complexity 5, which exceeds the limit of 4")


def test_introspection_off(client: httpx.Client) -> None:
    for query in ("{ __schema { description } }", '{ __type(name: "Meta") { name } }'):
        body = _gql(client, query)
        assert body["data"] is None
        assert body["errors"][0]["message"] == "introspection disabled"
        assert body["errors"][0]["extensions"]["code"] == "failed_precondition"
    # __typename reveals nothing new and stays allowed.
    assert _gql(client, "{ __typename }") == {"data": {"__typename": "Query"}}


def _body_of(size: int) -> bytes:
    """A valid request of exactly ``size`` bytes (the query padded with whitespace)."""
    bare = json.dumps({"query": "{ meta { client_id } }"}, separators=(",", ":")).encode()
    padding = size - len(bare)
    assert padding >= 0
    return bare.replace(b'}"}', b"}" + b" " * padding + b'"}')


def test_body_limit_above_the_app_wide_one(client: httpx.Client) -> None:
    headers = {"content-type": "application/json"}
    at_limit = client.post("/graphql", content=_body_of(MAX_BODY), headers=headers)
    assert at_limit.status_code == 200
    assert at_limit.json() == {"data": {"meta": {"client_id": CLIENT_ID}}}
    over = client.post("/graphql", content=_body_of(MAX_BODY + 1), headers=headers)
    assert over.status_code == 413
    assert over.json() == {
        "data": None,
        "errors": [
            {
                "message": f"request body of {MAX_BODY + 1} bytes exceeds maximum "
                f"of {MAX_BODY} bytes",
                "extensions": {"code": "resource_exhausted"},
            }
        ],
    }
    # Every other route keeps its own 1 MiB limit (413 closes the connection: the refused
    # body may still be arriving, so the next request needs a fresh one).
    assert over.headers["connection"] == "close"
    rest = json.dumps({"admin_secret": "x" * (1 << 20)}).encode()
    refused = client.post("/v1/admin/login", content=rest, headers=headers)
    assert refused.status_code == 413
    assert refused.json() == {"code": "resource_exhausted", "message": "request body too large"}


def test_chunked_body_over_the_limit_is_refused(client: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield _body_of(MAX_BODY + 10)

    over = client.post("/graphql", content=chunks(), headers={"content-type": "application/json"})
    assert over.status_code == 413
    assert over.json()["code"] == "resource_exhausted"


def test_client_id_header(client: httpx.Client) -> None:
    query = {"query": "{ meta { client_id } }"}
    same = client.post("/graphql", json=query, headers={"x-authorizer-client-id": CLIENT_ID})
    assert same.json() == {"data": {"meta": {"client_id": CLIENT_ID}}}
    # authorizer-js sends an empty header when configured without a client id.
    empty = client.post("/graphql", json=query, headers={"x-authorizer-client-id": ""})
    assert empty.json() == {"data": {"meta": {"client_id": CLIENT_ID}}}
    other = client.post("/graphql", json=query, headers={"x-authorizer-client-id": "other"})
    assert other.status_code == 400
    assert other.json() == {
        "error": "invalid_client_id",
        "error_description": "The client id is invalid",
    }


def _issuer(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["iss"])


def test_forged_authorizer_url_changes_no_issuer(
    server: ServerProcess, client: httpx.Client
) -> None:
    forged = {"x-authorizer-url": "https://evil.example", "x-forwarded-host": "evil.example"}
    email = f"{uuid.uuid4().hex}@example.com"
    params = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    signup = client.post(
        "/graphql",
        json={
            "query": "mutation($p: SignUpRequest!) { signup(params: $p) { access_token } }",
            "variables": {"p": params},
        },
        headers=forged,
    ).json()
    assert _issuer(signup["data"]["signup"]["access_token"]) == server.url
    login = client.post(
        "/graphql",
        json={
            "query": "mutation($p: LoginRequest!) { login(params: $p) { access_token } }",
            "variables": {"p": {"email": email, "password": PASSWORD}},
        },
        headers=forged,
    ).json()
    token = login["data"]["login"]["access_token"]
    assert _issuer(token) == server.url
    valid = client.post(
        "/graphql",
        json={
            "query": "query($p: ValidateJWTTokenRequest!) "
            "{ validate_jwt_token(params: $p) { is_valid } }",
            "variables": {"p": {"token_type": "access_token", "token": token}},
        },
        headers=forged,
    ).json()
    assert valid == {"data": {"validate_jwt_token": {"is_valid": True}}}


def test_playground_off(client: httpx.Client) -> None:
    for path in ("/playground", "/playground/assets/playground.js"):
        response = client.get(path)
        assert response.status_code == 404
        assert response.json() == {"code": "not_found", "message": "not found"}
