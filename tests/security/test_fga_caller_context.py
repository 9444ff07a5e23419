"""Issue 36 (9): a plain user's ``context`` decided server-side facts.

A grant that expired in 2020 was ``allowed: true`` when the user sent ``current_time:
2019-...``; an intranet-only grant (``10.0.0.0/8``) was allowed when the user sent ``ip:
10.1.2.3`` from 127.0.0.1. Real servers over REST, GraphQL and gRPC: a non-admin's request
context is refused (403 naming ``--allow-user-context``); with that flag it is taken; and
the parameters named by ``--fga-server-context`` are filled by the server (its clock, the
client address after ``--trusted-proxies``) over what any caller sends, an admin's too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.service.fga.service import CONTEXT_REFUSED
from bastion.transports.grpc.proto.authorizer.v1 import (
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_auth_flows import bearer, new_user
from tests.server.test_fga_api import ADMIN, admin, tuple_, uid

MODEL = """model
  schema 1.1

type user

type document
  relations
    define viewer: [user with not_expired, user with intranet, user with in_hours]

condition not_expired(current_time: timestamp, expires: timestamp) {
  current_time < expires
}

condition intranet(ip: ipaddress) {
  ip.in_cidr("10.0.0.0/8")
}

condition in_hours(hour: int) {
  hour >= 9 && hour < 17
}
"""
#: What the attacker claims: a time before its grant expired, an intranet address.
CLAIMS = {"current_time": "2019-06-01T00:00:00Z", "ip": "10.1.2.3"}
CHECKS_GQL = (
    "query($p: CheckPermissionsInput!) { check_permissions(params: $p) "
    "{ results { object allowed } } }"
)
LIST_GQL = "query($p: ListPermissionsInput!) { list_permissions(params: $p) { objects } }"
ADMIN_METADATA = [("x-service-admin-secret", ADMIN_SECRET)]


def _start(tmp: Path, *extra: str) -> Iterator[ServerProcess]:
    with running([*base_flags("sqlite", str(tmp / "bastion.db")), *extra], tmp) as srv:
        with srv.client() as client:
            admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
        yield srv


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _start(tmp_path_factory.mktemp("fga-context-default"))


@pytest.fixture(scope="module")
def filling_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _start(
        tmp_path_factory.mktemp("fga-context-filled"),
        "--fga-server-context=current_time,ip=client_ip",
        "--trusted-proxies=127.0.0.1",
        "--allow-user-context",
    )


class Grants:
    """A signed-in user with four documents: a grant that expired in 2020, one that
    expires in 2100, an intranet-only one and an office-hours one."""

    def __init__(self, client: httpx.Client) -> None:
        _, session = new_user(client)
        self.token: str = session["access_token"]
        self.user = f"user:{session['user']['id']}"
        self.expired, self.live, self.intranet, self.hours = (f"document:{uid()}" for _ in range(4))
        grants = [
            (self.expired, "not_expired", {"expires": "2020-01-01T00:00:00Z"}),
            (self.live, "not_expired", {"expires": "2100-01-01T00:00:00Z"}),
            (self.intranet, "intranet", None),
            (self.hours, "in_hours", None),
        ]
        tuples = [
            tuple_(
                self.user,
                "viewer",
                doc,
                condition={"name": name, **({"context": stored} if stored else {})},
            )
            for doc, name, stored in grants
        ]
        admin(client, "/v1/admin/fga/tuples", {"tuples": tuples})

    def checks(self, context: dict[str, Any] | None, *docs: str) -> dict[str, Any]:
        extra = {} if context is None else {"context": context}
        return {"checks": [{"relation": "viewer", "object": doc, **extra} for doc in docs]}

    def grpc_checks(
        self, context: dict[str, Any] | None, *docs: str
    ) -> authorizer_pb2.CheckPermissionsRequest:
        checks = []
        for doc in docs:
            check = types_pb2.PermissionCheckInput(relation="viewer", object=doc)
            if context is not None:
                check.context.update(context)
            checks.append(check)
        return authorizer_pb2.CheckPermissionsRequest(checks=checks)


def _stub(server: ServerProcess) -> Iterator[authorizer_pb2_grpc.AuthorizerServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield authorizer_pb2_grpc.AuthorizerServiceStub(channel)


def _allowed(results: list[dict[str, Any]]) -> dict[str, bool]:
    return {r["object"]: r["allowed"] for r in results}


def test_a_users_context_is_refused_on_every_surface(default_server: ServerProcess) -> None:
    assert "--allow-user-context" in CONTEXT_REFUSED
    with default_server.client() as client:
        me = Grants(client)
        user = bearer(me.token)
        body = me.checks(CLAIMS, me.expired, me.intranet)
        rest = client.post("/v1/check_permissions", json=body, headers=user)
        assert rest.status_code == 403
        assert rest.json() == {"code": "permission_denied", "message": CONTEXT_REFUSED}
        listing = {"object_type": "document", "relation": "viewer", "context": CLAIMS}
        listed = client.post("/v1/list_permissions", json=listing, headers=user)
        assert listed.status_code == 403
        assert listed.json() == {"code": "permission_denied", "message": CONTEXT_REFUSED}
        for query, params in ((CHECKS_GQL, body), (LIST_GQL, listing)):
            gql = client.post(
                "/graphql", json={"query": query, "variables": {"p": params}}, headers=user
            ).json()
            assert [e["message"] for e in gql["errors"]] == [CONTEXT_REFUSED]
            assert gql["errors"][0]["extensions"]["code"] == "permission_denied"
        for stub in _stub(default_server):
            metadata = [("authorization", f"Bearer {me.token}")]
            for call, request in (
                (stub.CheckPermissions, me.grpc_checks(CLAIMS, me.expired)),
                (
                    stub.ListPermissions,
                    authorizer_pb2.ListPermissionsRequest(object_type="document"),
                ),
            ):
                if isinstance(request, authorizer_pb2.ListPermissionsRequest):
                    request.context.update(CLAIMS)
                with pytest.raises(grpc.RpcError) as refused:
                    call(request, metadata=metadata, timeout=10)
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert refused.value.details() == CONTEXT_REFUSED
        # Without a context the user is answered: the conditions miss their parameters.
        plain = client.post("/v1/check_permissions", json=me.checks(None, me.expired), headers=user)
        assert plain.status_code == 200
        [result] = plain.json()["results"]
        assert result["allowed"] is False
        assert "missing parameters" in result["error"]["message"]
        # A super-admin may still send one (for any subject): the answer is its choice.
        chosen = admin(
            client, "/v1/check_permissions", {**me.checks(CLAIMS, me.expired), "user": me.user}
        )
        assert _allowed(chosen["results"]) == {me.expired: True}


def test_the_server_fills_the_time_and_address_over_any_callers(
    filling_server: ServerProcess,
) -> None:
    with filling_server.client() as client:
        me = Grants(client)
        user = bearer(me.token)
        docs = (me.expired, me.live, me.intranet, me.hours)
        # The user sends nothing: the server's clock and the caller's address decide.
        plain = client.post("/v1/check_permissions", json=me.checks(None, *docs[:3]), headers=user)
        assert _allowed(plain.json()["results"]) == {
            me.expired: False,
            me.live: True,
            me.intranet: False,
        }
        # Behind a trusted proxy, the address it forwards is the caller's.
        forwarded = client.post(
            "/v1/check_permissions",
            json=me.checks(None, me.intranet),
            headers={**user, "x-forwarded-for": "10.1.2.3"},
        )
        assert _allowed(forwarded.json()["results"]) == {me.intranet: True}
        # The user's claims (taken: --allow-user-context) never replace the server's values,
        # and its own parameters count.
        claimed = {**CLAIMS, "hour": 10}
        rest = client.post("/v1/check_permissions", json=me.checks(claimed, *docs), headers=user)
        expected = {me.expired: False, me.live: True, me.intranet: False, me.hours: True}
        assert _allowed(rest.json()["results"]) == expected
        # ... nor an admin's, on every surface.
        as_admin = {**me.checks(claimed, *docs), "user": me.user}
        assert _allowed(admin(client, "/v1/check_permissions", as_admin)["results"]) == expected
        gql = client.post(
            "/graphql", json={"query": CHECKS_GQL, "variables": {"p": as_admin}}, headers=ADMIN
        ).json()
        assert _allowed(gql["data"]["check_permissions"]["results"]) == expected
        listing = {"object_type": "document", "relation": "viewer", "context": claimed}
        listed = client.post("/v1/list_permissions", json=listing, headers=user).json()
        assert sorted(listed["objects"]) == sorted([me.live, me.hours])
        gql = client.post(
            "/graphql", json={"query": LIST_GQL, "variables": {"p": listing}}, headers=user
        ).json()
        assert sorted(gql["data"]["list_permissions"]["objects"]) == sorted([me.live, me.hours])
        users = admin(
            client,
            "/v1/admin/fga/list_users",
            {"object": me.expired, "relation": "viewer", "user_type": "user", "context": claimed},
        )
        assert users["users"] == []
    for stub in _stub(filling_server):
        request = me.grpc_checks(claimed, *docs)
        request.user = me.user
        reply = stub.CheckPermissions(request, metadata=ADMIN_METADATA, timeout=10)
        assert {r.object: r.allowed for r in reply.results} == expected
        mine = stub.CheckPermissions(
            me.grpc_checks(claimed, *docs),
            metadata=[("authorization", f"Bearer {me.token}")],
            timeout=10,
        )
        assert {r.object: r.allowed for r in mine.results} == expected
