"""Every admin endpoint of this surface refuses callers without super-admin credentials and
accepts the header and the cookie; under --disable-admin-header-auth only the cookie.
REST, GraphQL and gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running

MISSING = "00000000-0000-4000-8000-000000000000"
HOOK = {"event_name": "user.login", "endpoint": "http://127.0.0.1:9/hook", "enabled": True}

#: (REST path, body) for every endpoint of the admin surface built here.
ENDPOINTS: list[tuple[str, dict[str, Any]]] = [
    ("users", {}),
    ("user", {"id": MISSING}),
    ("update_user", {"id": MISSING, "nickname": "n"}),
    ("delete_user", {"email": "nobody@example.test"}),
    ("verification_requests", {}),
    ("revoke_access", {"user_id": MISSING}),
    ("enable_access", {"user_id": MISSING}),
    ("invite_members", {"emails": ["invitee@example.test"]}),
    ("add_webhook", HOOK),
    ("update_webhook", {"id": MISSING, "enabled": False}),
    ("delete_webhook", {"id": MISSING}),
    ("webhook", {"id": MISSING}),
    ("webhooks", {"pagination": {"page": 1, "limit": 5}}),
    ("webhook_logs", {"webhook_id": MISSING}),
    ("test_endpoint", {"event_name": "user.login", "endpoint": "http://127.0.0.1:9/hook"}),
    ("add_email_template", {"event_name": "forgot_password", "subject": "s", "template": "t"}),
    ("update_email_template", {"id": MISSING, "subject": "s"}),
    ("delete_email_template", {"id": MISSING}),
    ("email_templates", {}),
    ("audit_logs", {"action": "admin.webhook_created"}),
]

GRAPHQL = [
    "{ _users { pagination { total } } }",
    f'{{ _user(params: {{id: "{MISSING}"}}) {{ id }} }}',
    f'mutation {{ _update_user(params: {{id: "{MISSING}", nickname: "n"}}) {{ id }} }}',
    'mutation { _delete_user(params: {email: "nobody@example.test"}) { message } }',
    "{ _verification_requests { pagination { total } } }",
    f'mutation {{ _revoke_access(param: {{user_id: "{MISSING}"}}) {{ message }} }}',
    f'mutation {{ _enable_access(param: {{user_id: "{MISSING}"}}) {{ message }} }}',
    'mutation { _invite_members(params: {emails: ["invitee@example.test"]}) { message } }',
    'mutation { _add_webhook(params: {event_name: "user.login", endpoint: "http://127.0.0.1:9/",'
    " enabled: true}) { message } }",
    f'mutation {{ _update_webhook(params: {{id: "{MISSING}"}}) {{ message }} }}',
    f'mutation {{ _delete_webhook(params: {{id: "{MISSING}"}}) {{ message }} }}',
    f'{{ _webhook(params: {{id: "{MISSING}"}}) {{ id }} }}',
    "{ _webhooks { pagination { total } } }",
    "{ _webhook_logs { pagination { total } } }",
    'mutation { _test_endpoint(params: {endpoint: "http://127.0.0.1:9/", event_name: "user.login"})'
    " { http_status } }",
    'mutation { _add_email_template(params: {event_name: "verify_otp", subject: "s",'
    ' template: "t"}) { message } }',
    f'mutation {{ _update_email_template(params: {{id: "{MISSING}"}}) {{ message }} }}',
    f'mutation {{ _delete_email_template(params: {{id: "{MISSING}"}}) {{ message }} }}',
    "{ _email_templates { pagination { total } } }",
    "{ _audit_logs { pagination { total } } }",
]

RPCS: list[tuple[str, Any]] = [
    ("Users", admin_pb2.UsersRequest()),
    ("User", admin_pb2.UserRequest(id=MISSING)),
    ("UpdateUser", admin_pb2.UpdateUserRequest(id=MISSING, nickname="n")),
    ("DeleteUser", admin_pb2.DeleteUserRequest(email="nobody@example.test")),
    ("VerificationRequests", admin_pb2.VerificationRequestsRequest()),
    ("RevokeAccess", admin_pb2.RevokeAccessRequest(user_id=MISSING)),
    ("EnableAccess", admin_pb2.EnableAccessRequest(user_id=MISSING)),
    ("InviteMembers", admin_pb2.InviteMembersRequest(emails=["invitee@example.test"])),
    ("AddWebhook", admin_pb2.AddWebhookRequest(**HOOK)),
    ("UpdateWebhook", admin_pb2.UpdateWebhookRequest(id=MISSING)),
    ("DeleteWebhook", admin_pb2.DeleteWebhookRequest(id=MISSING)),
    ("GetWebhook", admin_pb2.GetWebhookRequest(id=MISSING)),
    ("Webhooks", admin_pb2.WebhooksRequest()),
    ("WebhookLogs", admin_pb2.WebhookLogsRequest()),
    ("TestEndpoint",
     admin_pb2.TestEndpointRequest(endpoint="http://127.0.0.1:9/", event_name="user.login")),
    ("AddEmailTemplate",
     admin_pb2.AddEmailTemplateRequest(event_name="update_email", subject="s", template="t")),
    ("UpdateEmailTemplate", admin_pb2.UpdateEmailTemplateRequest(id=MISSING)),
    ("DeleteEmailTemplate", admin_pb2.DeleteEmailTemplateRequest(id=MISSING)),
    ("EmailTemplates", admin_pb2.EmailTemplatesRequest()),
    ("AuditLogs", admin_pb2.AuditLogsRequest()),
]  # fmt: skip

UNAUTHORIZED = {"code": "unauthenticated", "message": "unauthorized"}


def _flags(tmp: Path, *extra: str) -> list[str]:
    return [
        *base_flags("sqlite", str(tmp / "bastion.db")),
        "--admin-cookie-secure=false",
        "--webhook-allow-private-targets",
        *extra,
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("access")
    with running(_flags(tmp), tmp) as srv:
        yield srv


@pytest.fixture(scope="module")
def cookie_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("cookie-only")
    with running(_flags(tmp, "--disable-admin-header-auth"), tmp) as srv:
        yield srv


def _login(server: ServerProcess) -> str:
    with server.client() as client:
        login = client.post("/v1/admin/login", json={"admin_secret": ADMIN_SECRET})
        assert login.status_code == 200, login.text
        return str(client.cookies["service-admin"])


@pytest.fixture(scope="module")
def cookies(server: ServerProcess, cookie_only: ServerProcess) -> dict[int, str]:
    """One admin session cookie per server (admin login is throttled per address)."""
    return {server.http_port: _login(server), cookie_only.http_port: _login(cookie_only)}


def _cookie_client(server: ServerProcess, cookies: dict[int, str]) -> httpx.Client:
    return server.client(cookies={"service-admin": cookies[server.http_port]})


@pytest.mark.parametrize(("path", "body"), ENDPOINTS, ids=[p for p, _ in ENDPOINTS])
def test_rest_credentials(
    server: ServerProcess,
    cookie_only: ServerProcess,
    cookies: dict[int, str],
    path: str,
    body: dict[str, Any],
) -> None:
    url = f"/v1/admin/{path}"
    with server.client() as anonymous:
        for headers in ({}, {"x-service-admin-secret": "wrong"}):
            refused = anonymous.post(url, json=body, headers=headers)
            assert refused.status_code == 401
            assert refused.json() == UNAUTHORIZED
        by_header = anonymous.post(url, json=body, headers={"x-service-admin-secret": ADMIN_SECRET})
        assert by_header.status_code != 401, by_header.text
    with _cookie_client(server, cookies) as admin:
        by_cookie = admin.post(url, json=body)
        assert by_cookie.status_code != 401, by_cookie.text

    with cookie_only.client() as anonymous:
        header = anonymous.post(url, json=body, headers={"x-service-admin-secret": ADMIN_SECRET})
        assert header.status_code == 401
        assert header.json() == UNAUTHORIZED
        assert anonymous.post(url, json=body).status_code == 401
    with _cookie_client(cookie_only, cookies) as admin:
        assert admin.post(url, json=body).status_code != 401


def _graphql_errors(client: httpx.Client, query: str, headers: dict[str, str]) -> list[Any]:
    response = client.post("/graphql", json={"query": query}, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json().get("errors") or [])


@pytest.mark.parametrize("query", GRAPHQL)
def test_graphql_credentials(
    server: ServerProcess, cookie_only: ServerProcess, cookies: dict[int, str], query: str
) -> None:
    def codes(errors: list[Any]) -> set[str]:
        return {e.get("extensions", {}).get("code") for e in errors}

    with server.client() as anonymous:
        assert codes(_graphql_errors(anonymous, query, {})) == {"unauthenticated"}
        header = _graphql_errors(anonymous, query, {"x-service-admin-secret": ADMIN_SECRET})
        assert "unauthenticated" not in codes(header)
    with _cookie_client(server, cookies) as admin:
        assert "unauthenticated" not in codes(_graphql_errors(admin, query, {}))
    with cookie_only.client() as anonymous:
        header = _graphql_errors(anonymous, query, {"x-service-admin-secret": ADMIN_SECRET})
        assert codes(header) == {"unauthenticated"}
    with _cookie_client(cookie_only, cookies) as admin:
        assert "unauthenticated" not in codes(_graphql_errors(admin, query, {}))


@pytest.mark.parametrize(("rpc", "request_message"), RPCS, ids=[r for r, _ in RPCS])
def test_grpc_credentials(
    server: ServerProcess,
    cookie_only: ServerProcess,
    cookies: dict[int, str],
    rpc: str,
    request_message: Any,
) -> None:
    def status(srv: ServerProcess, metadata: tuple[tuple[str, str], ...]) -> grpc.StatusCode:
        with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
            try:
                getattr(stub, rpc)(request_message, metadata=metadata, timeout=30)
            except grpc.RpcError as error:
                return error.code()  # type: ignore[no-any-return]
            return grpc.StatusCode.OK

    header = (("x-service-admin-secret", ADMIN_SECRET),)
    assert status(server, ()) == grpc.StatusCode.UNAUTHENTICATED
    assert status(server, (("x-service-admin-secret", "wrong"),)) == grpc.StatusCode.UNAUTHENTICATED
    assert status(server, header) != grpc.StatusCode.UNAUTHENTICATED
    assert status(cookie_only, header) == grpc.StatusCode.UNAUTHENTICATED
    cookie = (("cookie", f"service-admin={cookies[cookie_only.http_port]}"),)
    assert status(cookie_only, cookie) != grpc.StatusCode.UNAUTHENTICATED
