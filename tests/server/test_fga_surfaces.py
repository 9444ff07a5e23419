"""GraphQL and gRPC parity for every authorization-engine operation, against a real server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_fga_api import ADMIN, MODEL, admin, tuple_, uid

METADATA = [("x-service-admin-secret", ADMIN_SECRET)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("fga-surfaces")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def stubs(
    server: ServerProcess,
) -> Iterator[
    tuple[admin_pb2_grpc.AuthorizerAdminServiceStub, authorizer_pb2_grpc.AuthorizerServiceStub]
]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield (
            admin_pb2_grpc.AuthorizerAdminServiceStub(channel),
            authorizer_pb2_grpc.AuthorizerServiceStub(channel),
        )


def gql(client: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    response = client.post("/graphql", json={"query": query, "variables": variables}, headers=ADMIN)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def gql_data(client: httpx.Client, query: str, **variables: Any) -> dict[str, Any]:
    body = gql(client, query, **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def test_graphql_runs_every_operation_as_rest_does(client: httpx.Client) -> None:
    model = gql_data(
        client,
        "mutation($p: FgaWriteModelInput!) { _fga_write_model(params: $p) { id dsl } }",
        p={"dsl": MODEL},
    )["_fga_write_model"]
    assert client.get("/v1/admin/fga/model", headers=ADMIN).json() == model
    assert gql_data(client, "{ _fga_get_model { id dsl } }")["_fga_get_model"] == model
    who = uid()
    doc = f"document:{who}"
    tuples = {"tuples": [tuple_(who, "viewer", doc)]}
    written = gql_data(
        client,
        "mutation($p: FgaWriteTuplesInput!) { _fga_write_tuples(params: $p) { message } }",
        p=tuples,
    )
    assert written == {"_fga_write_tuples": {"message": "Tuples written successfully"}}
    read = gql_data(
        client,
        "query($p: FgaReadTuplesInput!) { _fga_read_tuples(params: $p) "
        "{ tuples { user relation object } continuation_token } }",
        p={"object": doc},
    )["_fga_read_tuples"]
    assert read == admin(client, "/v1/admin/fga/tuples/read", {"object": doc})
    checked = gql_data(
        client,
        "query($p: CheckPermissionsInput!) { check_permissions(params: $p)"
        " { results { relation object allowed } } }",
        p={"user": who, "checks": [{"relation": "can_view", "object": doc}]},
    )
    assert checked["check_permissions"]["results"] == [
        {"relation": "can_view", "object": doc, "allowed": True}
    ]
    listed = gql_data(
        client,
        "query($p: ListPermissionsInput!) { list_permissions(params: $p) "
        "{ objects permissions { object relation } truncated } }",
        p={"user": who, "object_type": "document", "relation": "viewer"},
    )
    assert listed["list_permissions"] == {
        "objects": [doc],
        "truncated": False,
        "permissions": [{"object": doc, "relation": "viewer"}],
    }
    users = gql_data(
        client,
        "query($p: FgaListUsersInput!) { _fga_list_users(params: $p) { users } }",
        p={"object": doc, "relation": "viewer", "user_type": "user"},
    )
    assert users["_fga_list_users"]["users"] == [f"user:{who}"]
    tree = gql_data(
        client,
        "query($p: FgaExpandInput!) { _fga_expand(params: $p) { tree } }",
        p={"object": doc, "relation": "viewer"},
    )["_fga_expand"]["tree"]
    assert json.loads(tree)["root"]["name"] == f"{doc}#viewer"
    refused = gql(client, "mutation { _fga_reset { message } }")
    assert refused["errors"][0]["message"] == (
        "remove all relationship tuples before resetting the authorization model"
    )
    assert refused["errors"][0]["extensions"]["code"] == "failed_precondition"
    deleted = gql_data(
        client,
        "mutation($p: FgaWriteTuplesInput!) { _fga_delete_tuples(params: $p) { message } }",
        p=tuples,
    )
    assert deleted == {"_fga_delete_tuples": {"message": "Tuples deleted successfully"}}


def test_graphql_reports_rest_errors(client: httpx.Client) -> None:
    over = gql(
        client,
        "query($p: CheckPermissionsInput!) { check_permissions(params: $p) "
        "{ results { allowed } } }",
        p={"user": "u", "checks": [{"relation": "r", "object": "o:1"}] * 101},
    )
    assert over["errors"][0]["message"] == "too many checks: max 100 per request"
    assert over["errors"][0]["extensions"]["code"] == "invalid_argument"


def test_grpc_runs_every_operation_as_rest_does(
    client: httpx.Client,
    stubs: tuple[
        admin_pb2_grpc.AuthorizerAdminServiceStub, authorizer_pb2_grpc.AuthorizerServiceStub
    ],
) -> None:
    admin_stub, public = stubs
    written = admin_stub.FgaWriteModel(
        admin_pb2.FgaWriteModelRequest(dsl=MODEL), metadata=METADATA, timeout=10
    )
    rest_model = client.get("/v1/admin/fga/model", headers=ADMIN).json()
    assert {"id": written.model.id, "dsl": written.model.dsl} == rest_model
    got = admin_stub.FgaGetModel(admin_pb2.FgaGetModelRequest(), metadata=METADATA, timeout=10)
    assert got.model.id == rest_model["id"]
    who = uid()
    doc = f"document:{who}"
    one = [types_pb2.FgaTupleInput(user=who, relation="viewer", object=doc)]
    reply = admin_stub.FgaWriteTuples(
        admin_pb2.FgaWriteTuplesRequest(tuples=one), metadata=METADATA, timeout=10
    )
    assert reply.message == "Tuples written successfully"
    read = admin_stub.FgaReadTuples(
        admin_pb2.FgaReadTuplesRequest(object=doc, page_size=5), metadata=METADATA, timeout=10
    )
    assert [(t.user, t.relation, t.object) for t in read.tuples] == [(f"user:{who}", "viewer", doc)]
    check = public.CheckPermissions(
        authorizer_pb2.CheckPermissionsRequest(
            user=who, checks=[types_pb2.PermissionCheckInput(relation="can_view", object=doc)]
        ),
        metadata=METADATA,
        timeout=10,
    )
    assert [(r.relation, r.object, r.allowed) for r in check.results] == [("can_view", doc, True)]
    listed = public.ListPermissions(
        authorizer_pb2.ListPermissionsRequest(user=who, object_type="document", relation="viewer"),
        metadata=METADATA,
        timeout=10,
    )
    assert list(listed.objects) == [doc]
    assert not listed.truncated
    users = admin_stub.FgaListUsers(
        admin_pb2.FgaListUsersRequest(object=doc, relation="viewer", user_type="user"),
        metadata=METADATA,
        timeout=10,
    )
    assert list(users.users) == [f"user:{who}"]
    tree = admin_stub.FgaExpand(
        admin_pb2.FgaExpandRequest(object=doc, relation="viewer"), metadata=METADATA, timeout=10
    )
    assert json.loads(tree.tree)["root"]["name"] == f"{doc}#viewer"
    with pytest.raises(grpc.RpcError) as refused:
        admin_stub.FgaReset(admin_pb2.FgaResetRequest(), metadata=METADATA, timeout=10)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    deleted = admin_stub.FgaDeleteTuples(
        admin_pb2.FgaDeleteTuplesRequest(tuples=one), metadata=METADATA, timeout=10
    )
    assert deleted.message == "Tuples deleted successfully"


def test_grpc_reports_rest_errors(
    stubs: tuple[
        admin_pb2_grpc.AuthorizerAdminServiceStub, authorizer_pb2_grpc.AuthorizerServiceStub
    ],
) -> None:
    _, public = stubs
    with pytest.raises(grpc.RpcError) as anonymous:
        public.CheckPermissions(
            authorizer_pb2.CheckPermissionsRequest(
                checks=[types_pb2.PermissionCheckInput(relation="r", object="o:1")]
            ),
            timeout=10,
        )
    assert anonymous.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert anonymous.value.details() == "unauthorized"
    with pytest.raises(grpc.RpcError) as empty:
        public.CheckPermissions(
            authorizer_pb2.CheckPermissionsRequest(user="u"), metadata=METADATA, timeout=10
        )
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert empty.value.details() == "at least one check is required"


def test_grpc_reset_succeeds_on_an_empty_store(tmp_path: Path) -> None:
    flags = [*base_flags("sqlite", str(tmp_path / "r.db")), "--fga-store=memory"]
    with (
        running(flags, tmp_path) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel,
    ):
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        stub.FgaWriteModel(admin_pb2.FgaWriteModelRequest(dsl=MODEL), metadata=METADATA, timeout=10)
        reset = stub.FgaReset(admin_pb2.FgaResetRequest(), metadata=METADATA, timeout=10)
        assert reset.message == "Authorization model reset successfully"
        after = stub.FgaGetModel(admin_pb2.FgaGetModelRequest(), metadata=METADATA, timeout=10)
        assert (after.model.id, after.model.dsl) == ("", "")


def test_request_context_and_per_check_errors_on_every_surface(
    client: httpx.Client,
    stubs: tuple[
        admin_pb2_grpc.AuthorizerAdminServiceStub, authorizer_pb2_grpc.AuthorizerServiceStub
    ],
) -> None:
    admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
    who = uid()
    doc = f"document:{who}"
    conditional = tuple_(who, "viewer", doc, condition={"name": "in_hours"})
    admin(client, "/v1/admin/fga/tuples", {"tuples": [conditional]})
    contexts: list[dict[str, Any] | None] = [None, {"hour": 10}, {"hour": 20}]

    def answers(results: list[dict[str, Any]]) -> list[tuple[bool, str | None]]:
        return [(r["allowed"], (r.get("error") or {}).get("message")) for r in results]

    rest = admin(
        client,
        "/v1/check_permissions",
        {
            "user": who,
            "checks": [
                {"relation": "viewer", "object": doc, **({"context": c} if c else {})}
                for c in contexts
            ],
        },
    )["results"]
    missing = rest[0]["error"]["message"]
    assert "'hour'" in missing
    assert answers(rest) == [(False, missing), (True, None), (False, None)]

    data = gql_data(
        client,
        "query($p: CheckPermissionsInput!) { check_permissions(params: $p) "
        "{ results { relation object allowed error { code message } } } }",
        p={
            "user": who,
            "checks": [{"relation": "viewer", "object": doc, "context": c} for c in contexts],
        },
    )
    results = data["check_permissions"]["results"]
    assert answers(results) == answers(rest)
    assert results[0]["error"]["code"] == "invalid_argument"

    _, public = stubs
    checks = []
    for c in contexts:
        check = types_pb2.PermissionCheckInput(relation="viewer", object=doc)
        if c:
            check.context.update(c)
        checks.append(check)
    reply = public.CheckPermissions(
        authorizer_pb2.CheckPermissionsRequest(user=who, checks=checks),
        metadata=METADATA,
        timeout=10,
    )
    assert [
        (r.allowed, r.error.message if r.HasField("error") else None) for r in reply.results
    ] == answers(rest)
    assert reply.results[0].error.code == "invalid_argument"


def test_list_operations_take_context_and_name_a_missing_parameter_on_every_surface(
    client: httpx.Client,
    stubs: tuple[
        admin_pb2_grpc.AuthorizerAdminServiceStub, authorizer_pb2_grpc.AuthorizerServiceStub
    ],
) -> None:
    """An evaluation error in list_permissions or _fga_list_users is 400 invalid_argument
    naming the parameter (never 403); request context supplies it."""
    admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
    who = uid()
    doc = f"document:{who}"
    conditional = tuple_(who, "viewer", doc, condition={"name": "in_hours"})
    admin(client, "/v1/admin/fga/tuples", {"tuples": [conditional]})
    permissions = {"user": who, "object_type": "document", "relation": "viewer"}
    users = {"object": doc, "relation": "viewer", "user_type": "user"}

    failed = client.post("/v1/list_permissions", json=permissions, headers=ADMIN)
    assert failed.status_code == 400
    assert failed.json()["code"] == "invalid_argument"
    message = failed.json()["message"]
    assert "'hour'" in message
    failed = client.post("/v1/admin/fga/list_users", json=users, headers=ADMIN)
    assert (failed.status_code, failed.json()) == (
        400,
        {"code": "invalid_argument", "message": message},
    )
    inside = admin(client, "/v1/list_permissions", {**permissions, "context": {"hour": 10}})
    assert inside["objects"] == [doc]
    outside = admin(client, "/v1/list_permissions", {**permissions, "context": {"hour": 20}})
    assert outside["objects"] == []
    listed = admin(client, "/v1/admin/fga/list_users", {**users, "context": {"hour": 10}})
    assert listed["users"] == [f"user:{who}"]

    permissions_query = (
        "query($p: ListPermissionsInput!) { list_permissions(params: $p) { objects } }"
    )
    users_query = "query($p: FgaListUsersInput!) { _fga_list_users(params: $p) { users } }"
    for query, params in ((permissions_query, permissions), (users_query, users)):
        errors = gql(client, query, p=params)["errors"]
        assert [(e["message"], e["extensions"]["code"]) for e in errors] == [
            (message, "invalid_argument")
        ]
    data = gql_data(client, permissions_query, p={**permissions, "context": {"hour": 10}})
    assert data["list_permissions"]["objects"] == [doc]
    data = gql_data(client, users_query, p={**users, "context": {"hour": 10}})
    assert data["_fga_list_users"]["users"] == [f"user:{who}"]

    admin_stub, public = stubs
    with pytest.raises(grpc.RpcError) as refused:
        public.ListPermissions(
            authorizer_pb2.ListPermissionsRequest(**permissions), metadata=METADATA, timeout=10
        )
    assert (refused.value.code(), refused.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
    )
    with pytest.raises(grpc.RpcError) as refused:
        admin_stub.FgaListUsers(
            admin_pb2.FgaListUsersRequest(**users), metadata=METADATA, timeout=10
        )
    assert (refused.value.code(), refused.value.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
    )
    request = authorizer_pb2.ListPermissionsRequest(**permissions)
    request.context.update({"hour": 10})
    reply = public.ListPermissions(request, metadata=METADATA, timeout=10)
    assert list(reply.objects) == [doc]
    users_request = admin_pb2.FgaListUsersRequest(**users)
    users_request.context.update({"hour": 10})
    found = admin_stub.FgaListUsers(users_request, metadata=METADATA, timeout=10)
    assert list(found.users) == [f"user:{who}"]
