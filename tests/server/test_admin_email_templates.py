"""Email templates over real HTTP and gRPC, and their mails through a real SMTP server:
an admin template (Authorizer's Go-template placeholders) replaces the built-in mail."""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.mailsink import SpooledMailSink
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, free_port, running

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
PASSWORD = "Str0ng!pass"

#: As an operator would bring it from Authorizer.
AUTHORIZER_TEMPLATE = """<html><body>
<img src="{{.organization.logo}}" alt="{{.organization.name}}" />
<p>Hi {{.user.given_name}},</p>
<p>Reset the password of {{.user.email}}: <a href="{{.verification_url}}">reset</a></p>
{{/* sent by bastion for forgot_password */}}
</body></html>"""


@pytest.fixture(scope="module")
def sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpooledMailSink]:
    tmp = tmp_path_factory.mktemp("mail")
    with SpooledMailSink(free_port(), tmp / "spool") as spool:
        yield spool


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, sink: SpooledMailSink
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("templates")
    flags = [
        *base_flags("sqlite", str(tmp / "bastion.db")),
        "--smtp-host=127.0.0.1",
        f"--smtp-port={sink.port}",
        "--smtp-sender-email=bastion@example.com",
        "--organization-name=Acme <Test>",
    ]
    with running(flags, tmp) as srv:
        yield srv


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
    assert response.json()["code"] == code
    return str(response.json()["message"])


def _templates(admin: httpx.Client) -> list[dict[str, Any]]:
    body = _ok(admin.post("/v1/admin/email_templates", json={"pagination": {"limit": 100}}))
    return list(body["email_templates"])


def _template_id(admin: httpx.Client, event: str) -> str:
    [found] = [t for t in _templates(admin) if t["event_name"] == event]
    return str(found["id"])


def _html(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("html",))
    assert isinstance(part, EmailMessage)
    return str(part.get_content())


def _mail_to(sink: SpooledMailSink, address: str, count: int) -> EmailMessage:
    """The ``count``-th mail sent to ``address``. Patient: under load the outbox may be
    retrying a delivery with backoff (2, 4, 8 ... s) when the mail arrives late."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        mine = [m for m in sink.messages() if m["To"] == address]
        if len(mine) >= count:
            return mine[count - 1]
        time.sleep(0.1)
    raise AssertionError(f"no mail {count} to {address}")


def test_an_admin_template_replaces_the_built_in_mail(
    server: ServerProcess, admin: httpx.Client, sink: SpooledMailSink
) -> None:
    address = "ada@example.test"
    with server.client() as client:
        signup = client.post(
            "/v1/signup",
            json={
                "email": address,
                "password": PASSWORD,
                "confirm_password": PASSWORD,
                "given_name": "<b>Ada</b>",
            },
        )
        assert signup.status_code == 200, signup.text
        added = admin.post(
            "/v1/admin/add_email_template",
            json={
                "event_name": "forgot_password",
                "subject": "{{.organization.name}}: reset for {{.user.email}}",
                "template": AUTHORIZER_TEMPLATE,
                "design": '{"editor": "json"}',
            },
        )
        assert _ok(added) == {"message": "Email template added successfully"}
        _ok(client.post("/v1/forgot_password", json={"email": address}))
        custom = _mail_to(sink, address, 1)
        assert custom["Subject"] == f"Acme <Test>: reset for {address}"
        html = _html(custom)
        assert "Hi &lt;b&gt;Ada&lt;/b&gt;," in html  # values are escaped, markup is not
        assert 'alt="Acme &lt;Test&gt;"' in html
        assert f"Reset the password of {address}:" in html
        assert '<a href="http' in html
        assert "token=" in html
        assert "sent by bastion" not in html

        # Without the template, the built-in mail comes back.
        template_id = _template_id(admin, "forgot_password")
        deleted = admin.post("/v1/admin/delete_email_template", json={"id": template_id})
        assert _ok(deleted) == {"message": "Email templated deleted successfully"}
        _ok(client.post("/v1/forgot_password", json={"email": address}))
        built_in = _mail_to(sink, address, 2)
        assert built_in["Subject"] == "Reset Password"


def test_crud_and_validation(admin: httpx.Client) -> None:
    body = {"event_name": "verify_otp", "subject": "Code", "template": "<p>{{.otp}}</p>"}
    _ok(admin.post("/v1/admin/add_email_template", json=body))
    message = _error(admin.post("/v1/admin/add_email_template", json=body), 409, "already_exists")
    assert message == "an email template for verify_otp already exists"
    template_id = _template_id(admin, "verify_otp")

    updated = admin.post(
        "/v1/admin/update_email_template",
        json={"id": template_id, "subject": "Your code {{.otp}}", "design": "d"},
    )
    assert _ok(updated) == {"message": "Email template updated successfully."}
    [saved] = [t for t in _templates(admin) if t["id"] == template_id]
    assert saved["subject"] == "Your code {{.otp}}"
    assert saved["template"] == "<p>{{.otp}}</p>"
    assert saved["design"] == "d"
    assert saved["updated_at"] >= saved["created_at"] > 0

    # Moving it to an event that already has a template is refused too.
    other = {"event_name": "invite_member", "subject": "Join", "template": "<p>hi</p>"}
    _ok(admin.post("/v1/admin/add_email_template", json=other))
    clash = admin.post(
        "/v1/admin/update_email_template", json={"id": template_id, "event_name": "invite_member"}
    )
    assert _error(clash, 409, "already_exists").endswith("invite_member already exists")

    for template in _templates(admin):
        admin.post("/v1/admin/delete_email_template", json={"id": template["id"]})
    missing = admin.post("/v1/admin/delete_email_template", json={"id": template_id})
    assert _error(missing, 404, "not_found") == "email template not found"
    missing = admin.post("/v1/admin/update_email_template", json={"id": template_id})
    assert _error(missing, 404, "not_found") == "email template not found"


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("add_email_template", {"event_name": "nope", "subject": "s", "template": "t"},
         "invalid event name nope"),
        ("add_email_template", {"event_name": "verify_otp", "subject": "", "template": "t"},
         "empty subject not allowed"),
        ("add_email_template", {"event_name": "verify_otp", "subject": "s", "template": " "},
         "empty template not allowed"),
        ("add_email_template",
         {"event_name": "verify_otp", "subject": "s", "template": "<p>{{ .otp | printf }}</p>"},
         "invalid template: line 1: pipelines are not supported (only field paths such as "
         "{{.user.email}})"),
        ("add_email_template",
         {"event_name": "verify_otp", "subject": "s", "template": "a\n{{range .x}}{{end}}"},
         "invalid template: line 2: 'range' is not supported (only field paths such as "
         "{{.user.email}})"),
        ("add_email_template",
         {"event_name": "verify_otp", "subject": "{{.otp", "template": "t"},
         "invalid subject: line 1: unclosed action '{{'"),
        ("update_email_template", {"subject": "s"}, "email template ID required"),
        ("update_email_template", {"id": "x", "template": "{{call .f}}"},
         "invalid template: line 1: 'call .f' is not a field path (only field paths such as "
         "{{.user.email}}; function calls are not supported)"),
        ("delete_email_template", {}, "email template ID required"),
    ],
)  # fmt: skip
def test_broken_templates_are_refused_with_the_reason(
    admin: httpx.Client, path: str, body: dict[str, Any], message: str
) -> None:
    assert _error(admin.post(f"/v1/admin/{path}", json=body), 400, "invalid_argument") == message


def test_pagination(admin: httpx.Client) -> None:
    events = ["basic_auth_signup", "magic_link_login", "update_email"]
    for event in events:
        body = {"event_name": event, "subject": event, "template": "<p>x</p>"}
        _ok(admin.post("/v1/admin/add_email_template", json=body))
    page = _ok(admin.post("/v1/admin/email_templates", json={"pagination": {"limit": 2}}))
    assert page["pagination"] == {"page": 1, "limit": 2, "total": 3, "offset": 0}
    assert len(page["email_templates"]) == 2
    last = _ok(
        admin.post("/v1/admin/email_templates", json={"pagination": {"limit": 2, "page": 2}})
    )
    assert len(last["email_templates"]) == 1
    beyond = _ok(admin.post("/v1/admin/email_templates", json={"pagination": {"page": 9}}))
    assert beyond["email_templates"] == []
    assert beyond["pagination"]["total"] == 3
    bad = admin.post("/v1/admin/email_templates", json={"pagination": {"limit": 0}})
    _error(bad, 400, "invalid_argument")
    for template in _templates(admin):
        admin.post("/v1/admin/delete_email_template", json={"id": template["id"]})


def test_graphql_and_grpc(server: ServerProcess, admin: httpx.Client) -> None:
    def graphql(query: str, variables: dict[str, Any]) -> Any:
        return _ok(admin.post("/graphql", json={"query": query, "variables": variables}))

    added = graphql(
        "mutation($p: AddEmailTemplateRequest!) { _add_email_template(params: $p) { message } }",
        {"p": {"event_name": "magic_link_login", "subject": "Sign in", "template": "<a>x</a>"}},
    )
    assert added["data"]["_add_email_template"]["message"] == "Email template added successfully"
    listed = graphql(
        "{ _email_templates { pagination { total } email_templates { id event_name design } } }",
        {},
    )["data"]["_email_templates"]
    [saved] = listed["email_templates"]
    assert saved["event_name"] == "magic_link_login"
    assert saved["design"] == ""
    broken = graphql(
        'mutation($id: ID!) { _update_email_template(params: {id: $id, template: "{{if}}"})'
        " { message } }",
        {"id": saved["id"]},
    )
    assert broken["errors"][0]["message"].startswith("invalid template: line 1: 'if'")

    metadata = tuple(ADMIN.items())
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        stub.UpdateEmailTemplate(
            admin_pb2.UpdateEmailTemplateRequest(id=saved["id"], subject="Sign in now"),
            metadata=metadata,
        )
        over_grpc = stub.EmailTemplates(admin_pb2.EmailTemplatesRequest(), metadata=metadata)
        assert [t.subject for t in over_grpc.email_templates] == ["Sign in now"]
        assert over_grpc.pagination.total == 1
        with pytest.raises(grpc.RpcError) as caught:
            stub.AddEmailTemplate(
                admin_pb2.AddEmailTemplateRequest(
                    event_name="magic_link_login", subject="s", template="t"
                ),
                metadata=metadata,
            )
        assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
        stub.DeleteEmailTemplate(
            admin_pb2.DeleteEmailTemplateRequest(id=saved["id"]), metadata=metadata
        )
        assert not stub.EmailTemplates(
            admin_pb2.EmailTemplatesRequest(), metadata=metadata
        ).email_templates
