"""Webhooks over real HTTP (REST, GraphQL) and gRPC against a real bastion process and a real
local receiver: administration, signed delivery on the outbox, test_endpoint, private
targets, and an event surviving a SIGKILL mid-delivery."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import sqlalchemy as sa

from bastion.storage import outbox, webhooks
from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_SECRET,
    ServerProcess,
    base_flags,
    running,
    start_server,
)
from tests.webhook_receiver import Receiver, receiver

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
USER = {"id": "4b1c6c1e-0000-4000-8000-000000000001", "email": "ada@example.test"}


def _flags(tmp: Path, *extra: str) -> list[str]:
    return [*base_flags("sqlite", str(tmp / "bastion.db")), *extra]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("webhooks")


@pytest.fixture(scope="module")
def server(tmp: Path) -> Iterator[ServerProcess]:
    with running(_flags(tmp, "--webhook-allow-private-targets"), tmp) as srv:
        yield srv


@pytest.fixture
def sink() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


@pytest.fixture
def admin(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        client.headers.update(ADMIN)
        yield client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code
    return str(body["message"])


def _add(client: httpx.Client, endpoint: str, event: str = "user.login", **extra: Any) -> str:
    """Add a webhook and return its id (the newest of the list)."""
    body = {"event_name": event, "endpoint": endpoint, "enabled": True, **extra}
    assert _ok(client.post("/v1/admin/add_webhook", json=body)) == {
        "message": "Webhook added successfully"
    }
    listed = _ok(client.post("/v1/admin/webhooks", json={"pagination": {"limit": 100}}))
    return str(
        max(listed["webhooks"], key=lambda w: (w["created_at"], w["endpoint"] == endpoint))["id"]
    )


def _enqueue_event(database: Path, event: str, user: dict[str, Any] = USER) -> None:
    """What the authentication flows do: a ``webhook_event`` in the outbox of the server's DB."""
    engine = sa.create_engine(f"sqlite:///{database}", connect_args={"timeout": 30})
    try:
        with engine.begin() as conn:
            payload = {"event_name": event, "user": user, "auth_recipe": "basic_auth"}
            outbox.enqueue(conn, "webhook_event", payload, now=time.time())
    finally:
        engine.dispose()


def _insert_webhook(database: Path, endpoint: str, event: str) -> str:
    """A webhook as stored when its host still resolved to a public address."""
    engine = sa.create_engine(f"sqlite:///{database}", connect_args={"timeout": 30})
    try:
        with engine.begin() as conn:
            return webhooks.insert_webhook(
                conn,
                event_name=event,
                event_description=event,
                endpoint=endpoint,
                enabled=True,
                headers={},
                now=int(time.time()),
            )
    finally:
        engine.dispose()


def _logs(client: httpx.Client, webhook_id: str, wanted: int, timeout: float = 60) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        logs = _ok(client.post("/v1/admin/webhook_logs", json={"webhook_id": webhook_id}))[
            "webhook_logs"
        ]
        if len(logs) >= wanted or time.monotonic() > deadline:
            return list(logs)
        time.sleep(0.1)


# ---------------------------------------------------------------- administration (REST)


def test_add_get_update_delete(admin: httpx.Client, sink: Receiver) -> None:
    first = _add(admin, sink.url + "/a", headers={"X-Tenant": "acme"})
    # Several webhooks per event, each with the event name exactly as registered.
    second = _add(admin, sink.url + "/b", event_description="second login hook")
    got = _ok(admin.post("/v1/admin/webhook", json={"id": first}))
    assert got["event_name"] == "user.login"
    assert got["event_description"] == "user login"
    assert got["endpoint"] == sink.url + "/a"
    assert got["enabled"] is True
    assert got["headers"] == {"X-Tenant": "acme"}
    assert got["created_at"] == got["updated_at"] > 0
    assert _ok(admin.post("/v1/admin/webhook", json={"id": second}))["event_name"] == "user.login"

    updated = admin.post(
        "/v1/admin/update_webhook",
        json={"id": first, "event_name": "user.deleted", "enabled": False, "headers": {}},
    )
    assert _ok(updated) == {"message": "Webhook updated successfully."}
    got = _ok(admin.post("/v1/admin/webhook", json={"id": first}))
    assert (got["event_name"], got["enabled"], got["headers"]) == ("user.deleted", False, {})
    assert got["endpoint"] == sink.url + "/a"  # untouched fields stay

    assert _ok(admin.post("/v1/admin/delete_webhook", json={"id": first})) == {
        "message": "Webhook deleted successfully"
    }
    _error(admin.post("/v1/admin/webhook", json={"id": first}), 404, "not_found")
    _error(admin.post("/v1/admin/delete_webhook", json={"id": first}), 404, "not_found")
    _error(admin.post("/v1/admin/update_webhook", json={"id": first}), 404, "not_found")
    admin.post("/v1/admin/delete_webhook", json={"id": second})


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("add_webhook", {"event_name": "user.nope", "endpoint": "http://x.test"},
         "invalid event name user.nope"),
        ("add_webhook", {"event_name": "user.login-1700000000", "endpoint": "http://x.test"},
         "invalid event name user.login-1700000000"),
        ("add_webhook", {"event_name": "user.login", "endpoint": ""}, "empty endpoint not allowed"),
        ("add_webhook", {"event_name": "user.login"}, "empty endpoint not allowed"),
        ("add_webhook", {"event_name": "user.login", "endpoint": "ftp://x.test/"},
         "invalid endpoint: the endpoint must be an http or https URL"),
        ("add_webhook", {"event_name": "user.login", "endpoint": "http://x.test",
                         "headers": {"X-Authorizer-Signature": "forged"}},
         "headers: X-Authorizer-Signature is set by the server"),
        ("add_webhook", {"event_name": "user.login", "endpoint": "http://x.test",
                         "headers": {"a": 1}}, "headers must be a map of strings"),
        ("add_webhook", {"event_name": "user.login", "endpoint": "http://x.test",
                         "enabled": "yes"}, "enabled must be a boolean"),
        ("update_webhook", {"event_name": "user.login"}, "webhook ID required"),
        ("update_webhook", {"id": "x", "event_name": "nope"}, "invalid event name nope"),
        ("delete_webhook", {}, "webhook ID required"),
        ("webhook", {}, "webhook ID required"),
        ("test_endpoint", {"event_name": "nope", "endpoint": "http://x.test"},
         "invalid event_name nope"),
    ],
)  # fmt: skip
def test_invalid_requests_are_refused_with_the_reason(
    admin: httpx.Client, path: str, body: dict[str, Any], message: str
) -> None:
    assert _error(admin.post(f"/v1/admin/{path}", json=body), 400, "invalid_argument") == message


def test_pagination_edges(admin: httpx.Client, sink: Receiver) -> None:
    before = _ok(admin.post("/v1/admin/webhooks", json={}))["pagination"]["total"]
    ids = [_add(admin, f"{sink.url}/{n}", event="user.signup") for n in range(12)]
    total = before + 12
    default = _ok(admin.post("/v1/admin/webhooks", json={}))
    assert default["pagination"] == {"page": 1, "limit": 10, "total": total, "offset": 0}
    assert len(default["webhooks"]) == 10
    page2 = _ok(admin.post("/v1/admin/webhooks", json={"pagination": {"page": 2, "limit": 10}}))
    assert page2["pagination"] == {"page": 2, "limit": 10, "total": total, "offset": 10}
    assert len(page2["webhooks"]) == total - 10
    seen = {w["id"] for w in default["webhooks"]} | {w["id"] for w in page2["webhooks"]}
    assert set(ids) <= seen
    assert len(seen) == total
    beyond = _ok(admin.post("/v1/admin/webhooks", json={"pagination": {"page": 50}}))
    assert beyond["webhooks"] == []
    assert beyond["pagination"] == {"page": 50, "limit": 10, "total": total, "offset": 490}
    biggest = _ok(admin.post("/v1/admin/webhooks", json={"pagination": {"limit": 100}}))
    assert len(biggest["webhooks"]) == total
    for bad, message in [
        ({"page": 0}, "pagination.page must be between 1 and 1000000000"),
        ({"page": -1}, "pagination.page must be between 1 and 1000000000"),
        ({"limit": 0}, "pagination.limit must be between 1 and 100"),
        ({"limit": -10}, "pagination.limit must be between 1 and 100"),
        ({"limit": 101}, "pagination.limit must be between 1 and 100"),
    ]:
        response = admin.post("/v1/admin/webhooks", json={"pagination": bad})
        assert _error(response, 400, "invalid_argument") == message
    for webhook_id in ids:
        admin.post("/v1/admin/delete_webhook", json={"id": webhook_id})


# ---------------------------------------------------------------- delivery


def test_an_event_is_delivered_signed_and_logged(
    admin: httpx.Client, sink: Receiver, tmp: Path
) -> None:
    webhook_id = _add(admin, sink.url, event="user.deactivated", headers={"X-Tenant": "acme"})
    _enqueue_event(tmp / "bastion.db", "user.deactivated")
    [request] = sink.wait_for(1)
    assert request.signature_ok(CLIENT_SECRET)
    body = request.json
    assert body["webhook_id"] == webhook_id
    assert body["event_name"] == "user.deactivated"
    assert body["event_description"] == "user deactivated"
    assert body["user"] == USER
    assert body["idempotency_key"] == request.headers["x-authorizer-idempotency-key"]
    assert request.headers["x-tenant"] == "acme"
    [log] = _logs(admin, webhook_id, 1)
    assert log["http_status"] == 200
    assert log["webhook_id"] == webhook_id
    assert log["request"] == request.body.decode()
    assert '"received": true' in log["response"]

    # Deleting the webhook deletes its logs.
    admin.post("/v1/admin/delete_webhook", json={"id": webhook_id})
    gone = _ok(admin.post("/v1/admin/webhook_logs", json={"webhook_id": webhook_id}))
    assert gone == {
        "webhook_logs": [],
        "pagination": {"page": 1, "limit": 10, "total": 0, "offset": 0},
    }


def test_failed_attempts_are_retried_and_each_one_logged(
    admin: httpx.Client, sink: Receiver, tmp: Path
) -> None:
    sink.script = [(500, 0.0)]
    webhook_id = _add(admin, sink.url, event="user.access_enabled")
    _enqueue_event(tmp / "bastion.db", "user.access_enabled")
    first, second = sink.wait_for(2)  # the outbox's backoff: ~2 s before the retry
    key = first.headers["x-authorizer-idempotency-key"]
    assert second.headers["x-authorizer-idempotency-key"] == key
    logs = _logs(admin, webhook_id, 2)
    assert sorted(log["http_status"] for log in logs) == [200, 500]
    admin.post("/v1/admin/delete_webhook", json={"id": webhook_id})


def test_test_endpoint_reports_the_answer(admin: httpx.Client, sink: Receiver) -> None:
    sink.script = [(201, 0.0), (500, 0.0)]
    body = {
        "event_name": "user.signup",
        "endpoint": sink.url,
        "headers": {"X-Probe": "1"},
    }
    answer = _ok(admin.post("/v1/admin/test_endpoint", json=body))
    assert answer == {"http_status": 201, "response": '{"received": true, "status": 201}'}
    [request] = sink.received
    assert request.json["event_name"] == "user.signup"
    assert request.json["user"]["email"] == "test_endpoint@authorizer.dev"
    assert request.headers["x-probe"] == "1"
    assert request.signature_ok(CLIENT_SECRET)
    assert _ok(admin.post("/v1/admin/test_endpoint", json=body))["http_status"] == 500
    # test_endpoint delivers nothing to the outbox and writes no webhook log.
    unreachable = {"event_name": "user.login", "endpoint": "http://127.0.0.1:9/nothing-here"}
    message = _error(admin.post("/v1/admin/test_endpoint", json=unreachable), 400,
                     "failed_precondition")  # fmt: skip
    assert message.startswith("endpoint unreachable: ")


# ---------------------------------------------------------------- GraphQL and gRPC


def _graphql(client: httpx.Client, query: str, variables: dict[str, Any] | None = None) -> Any:
    response = client.post("/graphql", json={"query": query, "variables": variables or {}})
    assert response.status_code == 200, response.text
    return response.json()


def test_graphql_surface(admin: httpx.Client, sink: Receiver) -> None:
    added = _graphql(
        admin,
        "mutation($p: AddWebhookRequest!) { _add_webhook(params: $p) { message } }",
        {"p": {"event_name": "user.created", "endpoint": sink.url, "enabled": True,
               "headers": {"k": "v"}}},
    )  # fmt: skip
    assert added == {"data": {"_add_webhook": {"message": "Webhook added successfully"}}}
    listed = _graphql(
        admin,
        "{ _webhooks(params: {pagination: {limit: 100}}) { pagination { page limit total offset }"
        " webhooks { id event_name event_description endpoint enabled headers } } }",
    )["data"]["_webhooks"]
    [hook] = [w for w in listed["webhooks"] if w["event_name"] == "user.created"]
    assert hook["headers"] == {"k": "v"}
    assert hook["event_description"] == "user created"
    assert listed["pagination"]["limit"] == 100
    got = _graphql(admin, "query($id: ID!) { _webhook(params: {id: $id}) { id endpoint } }",
                   {"id": hook["id"]})  # fmt: skip
    assert got["data"]["_webhook"] == {"id": hook["id"], "endpoint": sink.url}
    updated = _graphql(
        admin,
        "mutation($id: ID!) { _update_webhook(params: {id: $id, enabled: false}) { message } }",
        {"id": hook["id"]},
    )
    assert updated["data"]["_update_webhook"]["message"] == "Webhook updated successfully."
    tested = _graphql(
        admin,
        'mutation($e: String!) { _test_endpoint(params: {endpoint: $e, event_name: "user.login"})'
        " { http_status response } }",
        {"e": sink.url},
    )
    assert tested["data"]["_test_endpoint"]["http_status"] == 200
    logs = _graphql(
        admin,
        "query($id: String) { _webhook_logs(params: {webhook_id: $id}) { pagination { total }"
        " webhook_logs { id } } }",
        {"id": hook["id"]},
    )
    assert logs["data"]["_webhook_logs"]["pagination"]["total"] == 0
    bad = _graphql(admin, "{ _webhooks(params: {pagination: {page: 0}}) { webhooks { id } } }")
    assert bad["errors"][0]["message"] == "pagination.page must be between 1 and 1000000000"
    assert bad["errors"][0]["extensions"]["code"] == "invalid_argument"
    deleted = _graphql(
        admin,
        "mutation($id: ID!) { _delete_webhook(params: {id: $id}) { message } }",
        {"id": hook["id"]},
    )
    assert deleted["data"]["_delete_webhook"]["message"] == "Webhook deleted successfully"


def test_grpc_surface(server: ServerProcess, sink: Receiver) -> None:
    metadata = tuple(ADMIN.items())
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        headers = admin_pb2.AddWebhookRequest().headers
        headers.value.update({"k": "v"})
        added = stub.AddWebhook(
            admin_pb2.AddWebhookRequest(
                event_name="user.access_revoked", endpoint=sink.url, enabled=True, headers=headers
            ),
            metadata=metadata,
        )
        assert added.message == "Webhook added successfully"
        listed = stub.Webhooks(
            admin_pb2.WebhooksRequest(pagination={"limit": 100}), metadata=metadata
        )
        [hook] = [w for w in listed.webhooks if w.event_name == "user.access_revoked"]
        assert dict(hook.headers.value) == {"k": "v"}
        assert listed.pagination.limit == 100
        got = stub.GetWebhook(admin_pb2.GetWebhookRequest(id=hook.id), metadata=metadata)
        assert got.webhook.endpoint == sink.url
        assert got.webhook.enabled
        stub.UpdateWebhook(
            admin_pb2.UpdateWebhookRequest(id=hook.id, enabled=False), metadata=metadata
        )
        again = stub.GetWebhook(admin_pb2.GetWebhookRequest(id=hook.id), metadata=metadata)
        assert not again.webhook.enabled
        assert dict(again.webhook.headers.value) == {"k": "v"}
        tested = stub.TestEndpoint(
            admin_pb2.TestEndpointRequest(endpoint=sink.url, event_name="user.login"),
            metadata=metadata,
        )
        assert tested.http_status == 200
        logs = stub.WebhookLogs(admin_pb2.WebhookLogsRequest(webhook_id=hook.id), metadata=metadata)
        assert logs.pagination.total == 0
        # proto3 zeros are "unset": page 0 / limit 0 mean the defaults over gRPC.
        defaults = stub.Webhooks(admin_pb2.WebhooksRequest(), metadata=metadata)
        assert (defaults.pagination.page, defaults.pagination.limit) == (1, 10)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Webhooks(admin_pb2.WebhooksRequest(pagination={"page": -1}), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as caught:
            stub.AddWebhook(
                admin_pb2.AddWebhookRequest(event_name="nope", endpoint=sink.url),
                metadata=metadata,
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details() == "invalid event name nope"
        stub.DeleteWebhook(admin_pb2.DeleteWebhookRequest(id=hook.id), metadata=metadata)
        with pytest.raises(grpc.RpcError) as caught:
            stub.GetWebhook(admin_pb2.GetWebhookRequest(id=hook.id), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


# ---------------------------------------------------------------- private targets


def test_private_targets_are_refused_without_the_flag(tmp_path: Path, sink: Receiver) -> None:
    with running(_flags(tmp_path), tmp_path) as srv, srv.client() as client:
        client.headers.update(ADMIN)
        literal = {"event_name": "user.login", "endpoint": sink.url, "enabled": True}
        message = _error(client.post("/v1/admin/add_webhook", json=literal), 400,
                         "invalid_argument")  # fmt: skip
        assert message == "invalid endpoint: 127.0.0.1 is a loopback address"
        # A name is resolved when saved: refused here too.
        by_name = f"http://localhost:{sink.port}/hook"
        named = {"event_name": "user.deleted", "endpoint": by_name, "enabled": True}
        message = _error(client.post("/v1/admin/add_webhook", json=named), 400,
                         "invalid_argument")  # fmt: skip
        assert message.startswith("invalid endpoint: localhost resolves to a loopback address")
        # ... and again at every delivery: a name that resolved elsewhere when it was saved
        # (DNS rebinding) is refused when it is called.
        webhook_id = _insert_webhook(tmp_path / "bastion.db", by_name, "user.deleted")
        probe = {"event_name": "user.login", "endpoint": by_name}
        message = _error(client.post("/v1/admin/test_endpoint", json=probe), 400,
                         "invalid_argument")  # fmt: skip
        assert message.startswith("invalid endpoint: localhost resolves to a loopback address")
        _enqueue_event(tmp_path / "bastion.db", "user.deleted")
        [log] = _logs(client, webhook_id, 1)
        assert log["http_status"] == 0
        assert "refused target" in log["response"]
    assert sink.received == []


# ---------------------------------------------------------------- crash safety


def test_an_event_in_flight_when_the_server_is_killed_arrives_after_restart(
    tmp_path: Path, sink: Receiver
) -> None:
    flags = _flags(tmp_path, "--webhook-allow-private-targets")
    srv = start_server(flags, tmp_path, name="first")
    try:
        with srv.client() as client:
            client.headers.update(ADMIN)
            webhook_id = _add(client, sink.url, event="user.deleted")
        sink.release = threading.Event()  # hold the delivery in flight
        _enqueue_event(tmp_path / "bastion.db", "user.deleted")
        [in_flight] = sink.wait_for(1)
        srv.process.send_signal(signal.SIGKILL)
        srv.process.wait(30)
    finally:
        if srv.process.poll() is None:
            srv.process.kill()
    sink.release.set()
    sink.release = None

    # The new process takes the delivery over once the dead worker's lease lapses.
    with running(flags, tmp_path, name="second") as again, again.client() as client:
        client.headers.update(ADMIN)
        _first, second = sink.wait_for(2, timeout=120)
        key = in_flight.headers["x-authorizer-idempotency-key"]
        assert second.headers["x-authorizer-idempotency-key"] == key
        assert second.json["user"] == USER
        assert second.signature_ok(CLIENT_SECRET)
        [log] = _logs(client, webhook_id, 1)
        assert log["http_status"] == 200


def test_a_signup_fires_its_events_to_the_registered_webhooks(
    server: ServerProcess, admin: httpx.Client, sink: Receiver
) -> None:
    created = _add(admin, sink.url + "/created", event="user.created")
    signed_up = _add(admin, sink.url + "/signup", event="user.signup")
    email = f"signup-{time.monotonic_ns()}@example.test"
    with server.client() as client:
        body = {"email": email, "password": "Str0ng!pass", "confirm_password": "Str0ng!pass"}
        answer = client.post("/v1/signup", json=body)
        assert answer.status_code == 200, answer.text
    by_path = {r.path: r for r in sink.wait_for(2)}
    assert set(by_path) == {"/hook/created", "/hook/signup"}
    for path, webhook_id in (("/hook/created", created), ("/hook/signup", signed_up)):
        delivered = by_path[path]
        assert delivered.signature_ok(CLIENT_SECRET)
        assert delivered.json["webhook_id"] == webhook_id
        assert delivered.json["user"]["email"] == email
    assert by_path["/hook/signup"].json["auth_recipe"] == "basic_auth"
    for webhook_id in (created, signed_up):
        admin.post("/v1/admin/delete_webhook", json={"id": webhook_id})
