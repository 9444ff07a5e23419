"""Issue #36 (14): inputs that answered 500 answer 400 naming the field, on SQLite and on
PostgreSQL + Redis, over the OpenFGA API, REST, GraphQL and gRPC. The fix is at the edge
(the input rules on every route's path, query, form and JSON body) or in the engine (the
depth error), not one case per route."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.server.harness import ADMIN_SECRET, ServerProcess, backend_storage, running

KEY = "edge-refusals-key"
ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
#: base64("9" * 30): a position past every database's 64-bit integer
OVERFLOW = base64.urlsafe_b64encode(b"9" * 30).decode()
DEEP = "[" * 1000 + "]" * 1000
CHAIN = 600


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp(f"edge-refusals-{request.param}")
    storage = backend_storage(str(request.param), tmp, "refusals")
    with running([*storage.flags, f"--openfga-api-key={KEY}"], tmp) as process:
        yield process


@pytest.fixture(scope="module")
def fga(server: ServerProcess) -> Iterator[tuple[httpx.Client, str]]:
    """The OpenFGA API with a store holding a chain of computed relations."""
    headers = {"authorization": f"Bearer {KEY}", "origin": server.url}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        store = client.post("/stores", json={"name": "refusals"}).json()["id"]
        relations: dict[str, Any] = {
            f"r{i}": {"computedUserset": {"relation": f"r{i + 1}"}} for i in range(CHAIN)
        }
        relations[f"r{CHAIN}"] = {"this": {}}
        direct = {f"r{CHAIN}": {"directly_related_user_types": [{"type": "user"}]}}
        model = {
            "schema_version": "1.1",
            "type_definitions": [
                {"type": "user"},
                {"type": "doc", "relations": relations, "metadata": {"relations": direct}},
            ],
        }
        assert client.post(f"/stores/{store}/authorization-models", json=model).status_code == 201
        tuple_key = {"user": "user:a", "relation": f"r{CHAIN}", "object": "doc:1"}
        written = client.post(
            f"/stores/{store}/write", json={"writes": {"tuple_keys": [tuple_key]}}
        )
        assert written.status_code == 200, written.text
        yield client, store


def _refused(answer: httpx.Response, code: str, message: str) -> None:
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert answer.json() == {"code": code, "message": message}


def test_an_overflowing_continuation_token_is_refused(
    server: ServerProcess, fga: tuple[httpx.Client, str]
) -> None:
    client, store = fga
    refused = ("invalid_continuation_token", "Invalid continuation token")
    _refused(client.post(f"/stores/{store}/read", json={"continuation_token": OVERFLOW}), *refused)
    changes = client.get(f"/stores/{store}/changes", params={"continuation_token": OVERFLOW})
    _refused(changes, *refused)
    models = client.get(
        f"/stores/{store}/authorization-models", params={"continuation_token": OVERFLOW}
    )
    _refused(models, *refused)
    _refused(client.get("/stores", params={"continuation_token": OVERFLOW}), *refused)
    admin = httpx.post(
        f"{server.url}/v1/admin/fga/tuples/read",
        json={"continuation_token": OVERFLOW},
        headers={**ADMIN, "origin": server.url},
    )
    _refused(admin, "invalid_argument", "invalid continuation token")
    graphql = httpx.post(
        f"{server.url}/graphql",
        json={
            "query": "query($t: String) { _fga_read_tuples(params: {continuation_token: $t})"
            " { continuation_token } }",
            "variables": {"t": OVERFLOW},
        },
        headers={**ADMIN, "origin": server.url},
    ).json()
    assert graphql["errors"][0]["message"] == "invalid continuation token", graphql
    assert graphql["errors"][0]["extensions"]["code"] == "invalid_argument", graphql
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        with pytest.raises(grpc.RpcError) as grpc_refused:
            stub.FgaReadTuples(
                admin_pb2.FgaReadTuplesRequest(continuation_token=OVERFLOW),
                metadata=(("x-service-admin-secret", ADMIN_SECRET),),
                timeout=10,
            )
    assert grpc_refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert grpc_refused.value.details() == "invalid continuation token"


def test_a_long_computed_chain_is_openfgas_depth_error(fga: tuple[httpx.Client, str]) -> None:
    client, store = fga
    key = {"user": "user:a", "relation": "r0", "object": "doc:1"}
    depth = ("resolution_too_complex", "authorization model resolution too complex: depth exceeded")
    _refused(client.post(f"/stores/{store}/check", json={"tuple_key": key}), *depth)
    listed = {"user": "user:a", "relation": "r0", "type": "doc"}
    _refused(client.post(f"/stores/{store}/list-objects", json=listed), *depth)
    users = {
        "object": {"type": "doc", "id": "1"},
        "relation": "r0",
        "user_filters": [{"type": "user"}],
    }
    _refused(client.post(f"/stores/{store}/list-users", json=users), *depth)


def test_a_model_whose_type_definitions_are_strings_is_refused(
    fga: tuple[httpx.Client, str],
) -> None:
    client, store = fga
    model = {"schema_version": "1.1", "type_definitions": ["user", "doc"]}
    answer = client.post(f"/stores/{store}/authorization-models", json=model)
    _refused(answer, "invalid_authorization_model", "type_definitions[0] must be an object")
    nested = {"schema_version": "1.1", "type_definitions": [{"type": "doc", "relations": []}]}
    answer = client.post(f"/stores/{store}/authorization-models", json=nested)
    _refused(
        answer, "invalid_authorization_model", "type_definitions[0].relations must be an object"
    )


def test_nul_in_a_path_or_query_parameter_is_refused(
    server: ServerProcess, fga: tuple[httpx.Client, str]
) -> None:
    client, store = fga
    nul = "contains a NUL character"
    _refused(client.get("/stores/%00"), "invalid_argument", f"path.store_id {nul}")
    model = client.get(f"/stores/{store}/authorization-models/%00")
    _refused(model, "invalid_argument", f"path.model_id {nul}")
    changes = client.get(f"/stores/{store}/changes", params={"type": "doc\x00"})
    _refused(changes, "invalid_argument", f"query.type {nul}")
    landing = httpx.get(f"{server.url}/verify_email", params={"token": "abc\x00"})
    _refused(landing, "invalid_argument", f"query.token {nul}")
    posted = httpx.post(
        f"{server.url}/oauth/token",
        data={"grant_type": "authorization_code", "code": "c\x00"},
    )
    _refused(posted, "invalid_argument", f"form.code {nul}")


def test_an_integer_past_64_bits_is_refused(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url, headers={**ADMIN, "origin": server.url}) as http:
        logs = http.post("/v1/admin/audit_logs", json={"from_timestamp": 2**70})
        _refused(
            logs, "invalid_argument", "body.from_timestamp is out of range (integers are 64-bit)"
        )
        page = http.post("/v1/admin/audit_logs", json={"pagination": {"page": 2**63}})
        _refused(
            page, "invalid_argument", "body.pagination.page is out of range (integers are 64-bit)"
        )


@pytest.mark.parametrize(
    "path", ["/oauth/token", "/oauth/revoke", "/oauth/introspect", "/undo_email_change"]
)
def test_json_nested_1000_deep_is_refused_on_every_route(server: ServerProcess, path: str) -> None:
    answer = httpx.post(
        f"{server.url}{path}",
        content=DEEP,
        headers={"content-type": "application/json", "origin": server.url},
    )
    _refused(answer, "invalid_argument", "body is nested more than 64 levels deep")
