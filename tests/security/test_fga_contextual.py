"""Issue 28 (1): contextual tuples are facts the caller asserts, honoured for a super-admin only.

A plain user who could send them would grant itself any relation. Real servers over HTTP,
GraphQL and gRPC: without ``--allow-user-contextual-tuples`` a user's check with contextual
tuples is 403 ``permission_denied`` on every surface; with it, the user's tuples count.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.service.fga.service import CONTEXTUAL_REFUSED
from bastion.transports.grpc.proto.authorizer.v1 import (
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_auth_flows import bearer, new_user
from tests.server.test_fga_api import ADMIN, MODEL, admin, tuple_, uid

GQL = (
    "query($p: CheckPermissionsInput!) { check_permissions(params: $p) "
    "{ results { relation object allowed } } }"
)


def _start(tmp: Path, *extra: str) -> Iterator[ServerProcess]:
    with running([*base_flags("sqlite", str(tmp / "bastion.db")), *extra], tmp) as srv:
        with srv.client() as client:
            admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
        yield srv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _start(tmp_path_factory.mktemp("fga-contextual"))


def _victims_doc(client: httpx.Client) -> str:
    doc = f"document:{uid()}"
    admin(client, "/v1/admin/fga/tuples", {"tuples": [tuple_(f"user:{uid()}", "viewer", doc)]})
    return doc


def _user(client: httpx.Client) -> tuple[str, str]:
    """A plain signed-in user: its access token and its own subject."""
    _, session = new_user(client)
    return session["access_token"], f"user:{session['user']['id']}"


def _self_grant(subject: str, doc: str) -> dict[str, Any]:
    return {
        "checks": [
            {
                "relation": "can_view",
                "object": doc,
                "contextual_tuples": [tuple_(subject, "editor", doc)],
            }
        ]
    }


def test_a_user_may_not_grant_itself_a_relation_on_any_surface(server: ServerProcess) -> None:
    with server.client() as client:
        doc = _victims_doc(client)
        token, me = _user(client)
        body = _self_grant(me, doc)
        rest = client.post("/v1/check_permissions", json=body, headers=bearer(token))
        assert rest.status_code == 403
        assert rest.json() == {"code": "permission_denied", "message": CONTEXTUAL_REFUSED}
        assert "--allow-user-contextual-tuples" in CONTEXTUAL_REFUSED

        gql = client.post(
            "/graphql", json={"query": GQL, "variables": {"p": body}}, headers=bearer(token)
        ).json()
        assert gql.get("data") is None or gql["data"].get("check_permissions") is None
        assert [e["message"] for e in gql["errors"]] == [CONTEXTUAL_REFUSED]
        assert gql["errors"][0]["extensions"]["code"] == "permission_denied"

        request = authorizer_pb2.CheckPermissionsRequest(
            checks=[
                types_pb2.PermissionCheckInput(
                    relation="can_view",
                    object=doc,
                    contextual_tuples=[
                        types_pb2.FgaTupleInput(user=me, relation="editor", object=doc)
                    ],
                )
            ]
        )
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.CheckPermissions(
                    request, metadata=[("authorization", f"Bearer {token}")], timeout=10
                )
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert refused.value.details() == CONTEXTUAL_REFUSED

        # Without contextual tuples the same user is answered, and denied.
        plain = client.post(
            "/v1/check_permissions",
            json={"checks": [{"relation": "can_view", "object": doc}]},
            headers=bearer(token),
        )
        assert plain.status_code == 200
        assert plain.json()["results"][0]["allowed"] is False


def test_a_super_admin_may_assert_tuples_for_any_subject(server: ServerProcess) -> None:
    with server.client() as client:
        doc = _victims_doc(client)
        someone = f"user:{uid()}"
        answer = client.post(
            "/v1/check_permissions",
            json={**_self_grant(someone, doc), "user": someone},
            headers=ADMIN,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["results"][0]["allowed"] is True


def test_the_flag_lets_users_assert_tuples(tmp_path: Path) -> None:
    for srv in _start(tmp_path, "--allow-user-contextual-tuples"):
        with srv.client() as client:
            doc = _victims_doc(client)
            token, me = _user(client)
            answer = client.post(
                "/v1/check_permissions", json=_self_grant(me, doc), headers=bearer(token)
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["results"][0]["allowed"] is True


def test_list_permissions_follows_the_same_rule(server: ServerProcess) -> None:
    with server.client() as client:
        doc = _victims_doc(client)
        token, me = _user(client)
        body = {
            "object_type": "document",
            "relation": "can_view",
            "contextual_tuples": [tuple_(me, "editor", doc)],
        }
        refused = client.post("/v1/list_permissions", json=body, headers=bearer(token))
        assert refused.status_code == 403
        assert refused.json() == {"code": "permission_denied", "message": CONTEXTUAL_REFUSED}
        gql = client.post(
            "/graphql",
            json={
                "query": "query($p: ListPermissionsInput!) { list_permissions(params: $p) "
                "{ objects } }",
                "variables": {"p": body},
            },
            headers=bearer(token),
        ).json()
        assert [e["message"] for e in gql["errors"]] == [CONTEXTUAL_REFUSED]
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
            with pytest.raises(grpc.RpcError) as denied:
                stub.ListPermissions(
                    authorizer_pb2.ListPermissionsRequest(
                        object_type="document",
                        relation="can_view",
                        contextual_tuples=[
                            types_pb2.FgaTupleInput(user=me, relation="editor", object=doc)
                        ],
                    ),
                    metadata=[("authorization", f"Bearer {token}")],
                    timeout=10,
                )
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # A super-admin's contextual tuples and request context count in the list.
        someone = f"user:{uid()}"
        listed = admin(
            client,
            "/v1/list_permissions",
            {
                "user": someone,
                "object_type": "document",
                "relation": "viewer",
                "contextual_tuples": [
                    tuple_(someone, "editor", doc),
                    tuple_(someone, "viewer", f"{doc}-x", condition={"name": "in_hours"}),
                ],
                "context": {"hour": 10},
            },
        )
        assert sorted(listed["objects"]) == sorted([doc, f"{doc}-x"])


def test_admin_list_users_takes_context_and_contextual_tuples(server: ServerProcess) -> None:
    with server.client() as client:
        doc = f"document:{uid()}"
        someone, other = f"user:{uid()}", f"user:{uid()}"
        listed = admin(
            client,
            "/v1/admin/fga/list_users",
            {
                "object": doc,
                "relation": "viewer",
                "user_type": "user",
                "contextual_tuples": [
                    tuple_(someone, "editor", doc),
                    tuple_(other, "viewer", doc, condition={"name": "in_hours"}),
                ],
                "context": {"hour": 20},
            },
        )
        assert listed["users"] == [someone]
