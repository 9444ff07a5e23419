"""Issue 36 (8): one check froze the whole process past ``--request-timeout``.

``required.all(r, granted.exists(g, g == r))`` with 4,000-item lists in a request context
took 12 s on the event loop (``/healthz`` waited as long), and a three-level nested
``all()`` over 300 items on OpenFGA's API blocked it for 50 s. Now, on real servers: a
context holds at most 1,000 values (400 naming the largest entry); an evaluation past
OpenFGA's cost limit (``--fga-max-condition-cost``, cel-go's count, 100 by default) is the
check's condition error, as OpenFGA reports it (2000, ``operation cancelled: actual cost
limit exceeded``), on REST, GraphQL, gRPC and OpenFGA's API; and an evaluation the
operator allows (no limit) runs off the event loop, where ``/healthz`` keeps answering,
and stops at the request's deadline.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import (
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_fga_api import ADMIN, admin, tuple_, uid

API_KEY = "openfga-cost-key-0123456789"
STORE = "00000000000000000000000000"
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
MODEL = """model
  schema 1.1

type user

type document
  relations
    define viewer: [user with covers, user with nested]

condition covers(required: list<string>, granted: list<string>) {
  required.all(r, granted.exists(g, g == r))
}

condition nested(a: list<int>, b: list<int>, c: list<int>) {
  a.all(x, b.all(y, c.all(z, x + y + z >= 0)))
}
"""


def _start(tmp: Path, *extra: str) -> Iterator[ServerProcess]:
    flags = [*base_flags("sqlite", str(tmp / "bastion.db")), f"--openfga-api-key={API_KEY}"]
    with running([*flags, *extra], tmp) as srv:
        with srv.client() as client:
            admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
        yield srv


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _start(tmp_path_factory.mktemp("fga-cost"))


def _granted(client: httpx.Client, condition: str) -> tuple[str, str]:
    who, doc = f"user:{uid()}", f"document:{uid()}"
    tuple_key = tuple_(who, "viewer", doc, condition={"name": condition})
    admin(client, "/v1/admin/fga/tuples", {"tuples": [tuple_key]})
    return who, doc


def _covers(size: int) -> dict[str, list[str]]:
    items = [f"scope-{i}" for i in range(size)]
    return {"required": items, "granted": items[::-1]}


def _nested(size: int) -> dict[str, list[int]]:
    return {"a": list(range(size)), "b": list(range(size)), "c": list(range(size))}


def _check(who: str, doc: str, context: dict[str, Any]) -> dict[str, Any]:
    return {"user": who, "checks": [{"relation": "viewer", "object": doc, "context": context}]}


def _grpc_check(
    server: ServerProcess, who: str, doc: str, context: dict[str, Any], timeout: float = 30
) -> authorizer_pb2.CheckPermissionsResponse:
    check = types_pb2.PermissionCheckInput(relation="viewer", object=doc)
    check.context.update(context)
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        reply: authorizer_pb2.CheckPermissionsResponse = stub.CheckPermissions(
            authorizer_pb2.CheckPermissionsRequest(user=who, checks=[check]),
            metadata=[("x-service-admin-secret", ADMIN_SECRET)],
            timeout=timeout,
        )
    return reply


GQL = (
    "query($p: CheckPermissionsInput!) { check_permissions(params: $p) "
    "{ results { allowed error { code message } } } }"
)


def test_the_issues_4000_item_lists_are_refused_at_once(server: ServerProcess) -> None:
    with server.client() as client:
        who, doc = _granted(client, "covers")
        body = _check(who, doc, _covers(4000))
        refused = client.post("/v1/check_permissions", json=body, headers=ADMIN)
        assert refused.status_code == 400
        message = refused.json()["message"]
        assert refused.json()["code"] == "invalid_argument"
        assert message.startswith("context holds 8002 values"), message
        assert "at most 1000" in message
        assert "'granted' alone holds 4001" in message
        gql = client.post(
            "/graphql", json={"query": GQL, "variables": {"p": body}}, headers=ADMIN
        ).json()
        assert [e["message"] for e in gql["errors"]] == [message]
        with pytest.raises(grpc.RpcError) as caught:
            _grpc_check(server, who, doc, _covers(4000))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == message
        # list_permissions takes the same context and the same rule
        listed = client.post(
            "/v1/list_permissions",
            json={"user": who, "object_type": "document", "context": _covers(4000)},
            headers=ADMIN,
        )
        assert (listed.status_code, listed.json()["message"]) == (400, message)


def test_an_evaluation_past_the_cost_limit_is_the_checks_condition_error(
    server: ServerProcess,
) -> None:
    expected = f"condition 'covers' failed: {COST_EXCEEDED}"
    with server.client() as client:
        who, doc = _granted(client, "covers")
        # a few items are well within the limit: the condition decides
        small = admin(client, "/v1/check_permissions", _check(who, doc, _covers(3)))
        assert small["results"][0] == {"relation": "viewer", "object": doc, "allowed": True}
        body = _check(who, doc, _covers(300))
        rest = admin(client, "/v1/check_permissions", body)["results"][0]
        assert rest["allowed"] is False
        assert rest["error"] == {"code": "invalid_argument", "message": expected}
        gql = client.post(
            "/graphql", json={"query": GQL, "variables": {"p": body}}, headers=ADMIN
        ).json()
        assert gql["data"]["check_permissions"]["results"] == [
            {"allowed": False, "error": {"code": "invalid_argument", "message": expected}}
        ]
    [result] = _grpc_check(server, who, doc, _covers(300)).results
    assert (result.allowed, result.error.code, result.error.message) == (
        False,
        "invalid_argument",
        expected,
    )


def test_openfgas_api_answers_the_nested_all_as_openfga_does(server: ServerProcess) -> None:
    with server.client() as client:
        who, doc = _granted(client, "nested")
        for path, body in (
            ("check", {"tuple_key": {"user": who, "relation": "viewer", "object": doc}}),
            ("list-objects", {"user": who, "relation": "viewer", "type": "document"}),
        ):
            answer = client.post(
                f"/stores/{STORE}/{path}",
                json={**body, "context": _nested(300)},
                headers={"authorization": f"Bearer {API_KEY}"},
            )
            assert answer.status_code == 400, answer.text
            assert answer.json() == {
                "code": "validation_error",
                "message": f"condition 'nested' failed: {COST_EXCEEDED}",
            }
        allowed = client.post(
            f"/stores/{STORE}/check",
            json={
                "tuple_key": {"user": who, "relation": "viewer", "object": doc},
                "context": _nested(1),  # cost 21 (two elements each: 104)
            },
            headers={"authorization": f"Bearer {API_KEY}"},
        )
        assert allowed.json() == {"allowed": True, "resolution": ""}


def _cpu_seconds(server: ServerProcess) -> float:
    """The server process's CPU time so far (Linux /proc)."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks


def test_healthz_answers_while_allowed_evaluations_run_and_the_deadline_ends_them(
    tmp_path: Path,
) -> None:
    """No cost limit: 150 x 150 x 150 steps, far longer than ``--request-timeout=4``.

    Once the server is seen burning CPU on them, ``/healthz`` answers again and again
    while they run (on the event loop it could not); each answers 503 at the deadline,
    and the one sent over gRPC (with a grpc-timeout of its own far later) UNAVAILABLE
    with the same message; then a small check is answered, so their worker threads have
    stopped (they hold every evaluation slot while they run).
    """
    for srv in _start(tmp_path, "--fga-max-condition-cost=0", "--request-timeout=4"):
        with srv.client() as client:
            who, doc = _granted(client, "nested")
            heavy = _check(who, doc, _nested(150))
            before = _cpu_seconds(srv)
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                pending = [
                    pool.submit(client.post, "/v1/check_permissions", json=heavy, headers=ADMIN)
                    for _ in range(3)
                ]
                over_grpc = pool.submit(_grpc_check, srv, who, doc, _nested(150), timeout=120)
                every = [*pending, over_grpc]
                while _cpu_seconds(srv) < before + 0.2 and not all(f.done() for f in every):
                    time.sleep(0.05)
                answered = 0
                while not all(f.done() for f in every):
                    assert client.get("/healthz").status_code == 200
                    answered += 1
                assert answered >= 3
                for future in pending:
                    response = future.result()
                    assert response.status_code == 503
                    assert response.json()["message"] == "the request did not finish within 4s"
                with pytest.raises(grpc.RpcError) as caught:
                    over_grpc.result()
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
                assert caught.value.details() == "the request did not finish within 4s"
            small = admin(client, "/v1/check_permissions", _check(who, doc, _nested(2)))
            assert small["results"][0]["allowed"] is True
