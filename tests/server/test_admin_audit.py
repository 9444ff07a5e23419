"""Audit rows for every admin action, and /audit_logs (filters, order, pagination) on REST,
GraphQL and gRPC against a real bastion process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.webhook_receiver import Receiver, receiver

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("audit")
    flags = [*base_flags("sqlite", str(tmp / "bastion.db")), "--webhook-allow-private-targets"]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture(scope="module")
def sink() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def _audit(client: httpx.Client, **filters: Any) -> dict[str, Any]:
    filters.setdefault("pagination", {"limit": 100})
    return dict(_ok(client.post("/v1/admin/audit_logs", json=filters)))


@pytest.fixture(scope="module")
def history(server: ServerProcess, sink: Receiver) -> dict[str, Any]:
    """Every admin action of this build, once, over the three surfaces; what was done."""
    started = int(time.time())
    with server.client() as rest:
        rest.headers.update({**ADMIN, "user-agent": "audit-test/1"})
        hook_body = {"event_name": "user.login", "endpoint": sink.url, "enabled": True}
        _ok(rest.post("/v1/admin/add_webhook", json=hook_body))
        [hook] = _ok(rest.post("/v1/admin/webhooks", json={}))["webhooks"]
        _ok(rest.post("/v1/admin/update_webhook", json={"id": hook["id"], "enabled": False}))
        _ok(rest.post("/v1/admin/test_endpoint", json={"event_name": "user.login",
                                                        "endpoint": sink.url}))  # fmt: skip
        _ok(rest.post("/v1/admin/delete_webhook", json={"id": hook["id"]}))
        template_body = {"event_name": "verify_otp", "subject": "s", "template": "t"}
        _ok(rest.post("/v1/admin/add_email_template", json=template_body))
        [template] = _ok(rest.post("/v1/admin/email_templates", json={}))["email_templates"]
        _ok(rest.post("/v1/admin/update_email_template", json={"id": template["id"],
                                                                "subject": "s2"}))  # fmt: skip
        _ok(rest.post("/v1/admin/delete_email_template", json={"id": template["id"]}))
        graphql = rest.post(
            "/graphql",
            json={"query": 'mutation { _add_webhook(params: {event_name: "user.signup", '
                  f'endpoint: "{sink.url}", enabled: true}}) {{ message }} }}'},
        )  # fmt: skip
        assert "errors" not in _ok(graphql)
    options = [("grpc.primary_user_agent", "audit-grpc/1")]
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options) as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        stub.AddEmailTemplate(
            admin_pb2.AddEmailTemplateRequest(
                event_name="invite_member", subject="s", template="t"
            ),
            metadata=tuple(ADMIN.items()),
        )
    return {"webhook": hook["id"], "template": template["id"], "started": started}


@pytest.fixture
def admin(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        client.headers.update(ADMIN)
        yield client


def test_every_admin_action_is_recorded_with_actor_origin_and_protocol(
    admin: httpx.Client, history: dict[str, Any]
) -> None:
    rows = _audit(admin)["audit_logs"]
    actions = sorted(row["action"] for row in rows)
    assert actions == sorted(
        [
            "admin.webhook_created",
            "admin.webhook_updated",
            "admin.webhook_tested",
            "admin.webhook_deleted",
            "admin.email_template_created",
            "admin.email_template_updated",
            "admin.email_template_deleted",
            "admin.webhook_created",
            "admin.email_template_created",
        ]
    )
    for row in rows:
        assert row["actor_id"] == "admin"
        assert row["actor_type"] == "admin"
        assert row["ip_address"] == "127.0.0.1"
        assert row["created_at"] >= history["started"]
        protocol = json.loads(row["metadata"])["protocol"]
        if protocol == "grpc":
            assert row["action"] == "admin.email_template_created"
            assert row["user_agent"].startswith("audit-grpc/1")
        else:
            assert row["user_agent"] == "audit-test/1"
    protocols = sorted(json.loads(row["metadata"])["protocol"] for row in rows)
    assert protocols == ["graphql", "grpc"] + ["rest"] * 7
    created = next(
        r for r in rows if r["resource_id"] == history["webhook"]
        and r["action"] == "admin.webhook_created"
    )  # fmt: skip
    assert created["resource_type"] == "webhook"
    assert json.loads(created["metadata"])["event_name"] == "user.login"


def test_filters(admin: httpx.Client, history: dict[str, Any]) -> None:
    webhook, template = history["webhook"], history["template"]
    by_action = _audit(admin, action="admin.webhook_created")["audit_logs"]
    assert len(by_action) == 2
    assert {r["action"] for r in by_action} == {"admin.webhook_created"}
    # The spec's ``resource``: a type, or type:id.
    of_hook = _audit(admin, resource=f"webhook:{webhook}")["audit_logs"]
    assert sorted(r["action"] for r in of_hook) == [
        "admin.webhook_created",
        "admin.webhook_deleted",
        "admin.webhook_updated",
    ]
    assert _audit(admin, resource_type="webhook", resource_id=webhook)["audit_logs"] == of_hook
    templates = _audit(admin, resource="email_template")["audit_logs"]
    assert len(templates) == 4
    assert len(_audit(admin, resource_id=template)["audit_logs"]) == 3
    assert len(_audit(admin, actor_id="admin")["audit_logs"]) == 9
    assert _audit(admin, actor_id="someone-else")["audit_logs"] == []
    assert _audit(admin, from_timestamp=int(time.time()) + 3600)["audit_logs"] == []
    assert _audit(admin, to_timestamp=history["started"] - 1)["audit_logs"] == []
    window = _audit(admin, from_timestamp=history["started"], to_timestamp=int(time.time()))
    assert window["pagination"]["total"] == 9
    conflicting = admin.post(
        "/v1/admin/audit_logs", json={"resource": "webhook", "resource_type": "email_template"}
    )
    assert conflicting.status_code == 400
    assert conflicting.json()["code"] == "invalid_argument"


def test_newest_first_and_paged(admin: httpx.Client, history: dict[str, Any]) -> None:
    rows = _audit(admin)["audit_logs"]
    stamps = [r["created_at"] for r in rows]
    assert stamps == sorted(stamps, reverse=True)
    page1 = _audit(admin, pagination={"limit": 4})
    page3 = _audit(admin, pagination={"limit": 4, "page": 3})
    assert page1["pagination"] == {"page": 1, "limit": 4, "total": 9, "offset": 0}
    assert len(page1["audit_logs"]) == 4
    assert len(page3["audit_logs"]) == 1
    assert _audit(admin, pagination={"page": 4, "limit": 4})["audit_logs"] == []
    bad = admin.post("/v1/admin/audit_logs", json={"pagination": {"page": -2}})
    assert bad.status_code == 400


def test_graphql_and_grpc_listing(
    server: ServerProcess, admin: httpx.Client, history: dict[str, Any]
) -> None:
    query = (
        'query($id: String) { _audit_logs(params: {resource_type: "webhook", resource_id: $id,'
        " pagination: {limit: 2}}) { pagination { total limit } audit_logs { action actor_type"
        " metadata } } }"
    )
    body = _ok(
        admin.post("/graphql", json={"query": query, "variables": {"id": history["webhook"]}})
    )
    listing = body["data"]["_audit_logs"]
    assert listing["pagination"] == {"total": 3, "limit": 2}
    assert len(listing["audit_logs"]) == 2
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        over_grpc = stub.AuditLogs(
            admin_pb2.AuditLogsRequest(action="admin.email_template_created"),
            metadata=tuple(ADMIN.items()),
        )
    assert over_grpc.pagination.total == 2
    assert {row.resource_type for row in over_grpc.audit_logs} == {"email_template"}


def test_the_spec_resource_filter_on_graphql_and_grpc(
    server: ServerProcess, admin: httpx.Client, history: dict[str, Any]
) -> None:
    query = (
        "query($r: String) { _audit_logs(params: {resource: $r}) "
        "{ pagination { total } audit_logs { action resource_id } } }"
    )
    of_hook = f"webhook:{history['webhook']}"
    body = _ok(admin.post("/graphql", json={"query": query, "variables": {"r": of_hook}}))
    listing = body["data"]["_audit_logs"]
    assert listing["pagination"]["total"] == 3
    assert {row["resource_id"] for row in listing["audit_logs"]} == {history["webhook"]}
    templates = _ok(
        admin.post("/graphql", json={"query": query, "variables": {"r": "email_template"}})
    )
    assert templates["data"]["_audit_logs"]["pagination"]["total"] == 4
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        metadata = tuple(ADMIN.items())
        over_grpc = stub.AuditLogs(admin_pb2.AuditLogsRequest(resource=of_hook), metadata=metadata)
        assert over_grpc.pagination.total == 3
        assert {row.resource_id for row in over_grpc.audit_logs} == {history["webhook"]}
        with pytest.raises(grpc.RpcError) as conflicting:
            stub.AuditLogs(
                admin_pb2.AuditLogsRequest(resource="webhook", resource_type="email_template"),
                metadata=metadata,
            )
        assert conflicting.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_api_cannot_change_the_log(admin: httpx.Client, history: dict[str, Any]) -> None:
    before = _audit(admin)["pagination"]["total"]
    for path in ("/v1/admin/delete_audit_log", "/v1/admin/update_audit_log", "/v1/admin/audit_log"):
        # On the shared keep-alive client: a 404 must leave the connection usable.
        assert admin.post(path, json={"id": "x"}).status_code == 404
    mutation = _ok(admin.post("/graphql", json={"query": "mutation { _delete_audit_logs }"}))
    assert "errors" in mutation
    # Reading is not an action: listing leaves the log as it was.
    assert _audit(admin)["pagination"]["total"] == before
