"""Declared text lengths (``core.limits``): a value past its limit is 400
``invalid_argument`` naming the field and the limit on REST, GraphQL and gRPC, alike on
SQLite, PostgreSQL + Redis and MariaDB (issue 27's reproductions were 500s where a column
was shorter), and a value at its limit is stored on each of them. The issue's other
bad-input reproductions (a lone surrogate, NUL, JSON nested 1,000 deep) are 400 on each."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import httpx
import pytest

from bastion.core.limits import TEXT_LIMITS
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_mariadb_url
from tests.security.conftest import flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running

PASSWORD = "Limits!pass1"


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis", "mariadb"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    backend: str = request.param
    tmp = tmp_path_factory.mktemp(f"limits-{backend}")
    if backend == "mariadb":
        flags = base_flags("mariadb", fresh_mariadb_url("limits"))
    else:
        flags = flags_for(backend, tmp)
    with running(flags, tmp) as srv:
        yield srv


def _signup_body(**extra: str) -> dict[str, str]:
    email = f"limits-{uuid.uuid4().hex[:12]}@example.com"
    return {"email": email, "password": PASSWORD, "confirm_password": PASSWORD, **extra}


def _message(field: str) -> str:
    return f"{field} is longer than the limit of {TEXT_LIMITS[field]} characters"


@pytest.mark.parametrize(
    ("field", "length"), [("given_name", 300), ("nickname", 5000), ("given_name", 70000)]
)
def test_rest_signup_past_a_limit_is_400_naming_field_and_limit(
    server: ServerProcess, field: str, length: int
) -> None:
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        answer = http.post("/v1/signup", json=_signup_body(**{field: "x" * length}))
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_argument"
    assert answer.json()["message"] == _message(field)


def test_values_at_their_limits_are_stored(server: ServerProcess) -> None:
    at_limit = {
        field: "é" * TEXT_LIMITS[field]
        for field in ("given_name", "family_name", "middle_name", "nickname", "gender")
    }
    body = _signup_body(**at_limit)
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        signed_up = http.post("/v1/signup", json=body)
        assert signed_up.status_code == 200, signed_up.text
        token = signed_up.json()["access_token"]
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"})
        assert profile.status_code == 200, profile.text
        assert {field: profile.json()[field] for field in at_limit} == at_limit
        updated = http.post(
            "/v1/admin/update_user",
            json={"id": profile.json()["id"], "nickname": "n" * (TEXT_LIMITS["nickname"] + 1)},
            headers={"x-service-admin-secret": ADMIN_SECRET},
        )
    assert updated.status_code == 400, updated.text
    assert updated.json()["message"] == _message("nickname")


def test_graphql_signup_past_a_limit_is_invalid_argument(server: ServerProcess) -> None:
    query = "mutation($p: SignUpRequest!) { signup(params: $p) { access_token } }"
    variables = {"p": _signup_body(nickname="x" * 5000)}
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        answer = http.post("/graphql", json={"query": query, "variables": variables}).json()
    (error,) = answer["errors"]
    assert error["extensions"]["code"] == "invalid_argument", error
    assert error["message"] == _message("nickname")


def test_grpc_signup_past_a_limit_is_invalid_argument(server: ServerProcess) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Signup(
                authorizer_pb2.SignupRequest(**_signup_body(given_name="x" * 70000)), timeout=30
            )
    error: grpc.Call = refused.value  # type: ignore[assignment]
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == _message("given_name")


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/v1/login", '{"email":"\\udfff@x.com","password":"x"}'),
        ("/v1/admin/user", '{"id":"a\\u0000b"}'),
        ("/v1/login", '{"a":' * 1000 + "1" + "}" * 1000),
    ],
    ids=["lone-surrogate", "nul", "nested-1000"],
)
def test_unrepresentable_input_is_400_on_every_database(
    server: ServerProcess, path: str, raw: str
) -> None:
    headers = {"origin": server.url, "content-type": "application/json"}
    headers["x-service-admin-secret"] = ADMIN_SECRET
    answer = httpx.post(server.url + path, content=raw.encode(), headers=headers, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_argument"
