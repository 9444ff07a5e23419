"""Traces (``--otel-traces-endpoint``), received as a collector receives them: a real
OTLP/HTTP receiver in the test process decodes the server's ExportTraceServiceRequest
messages, and the spans of a REST login, a GraphQL check, a gRPC login and a webhook
delivery must form the trees the README promises, under the caller's ``traceparent``."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_redis_url, fresh_sqlite_url
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_auth_flows import PASSWORD, client_for, signup, unique_email
from tests.server.test_fga_api import ADMIN, MODEL, admin, tuple_, uid
from tests.webhook_receiver import Receiver, receiver

pytestmark = pytest.mark.slow


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]


class Collector:
    """An OTLP/HTTP traces endpoint: POST /v1/traces with a protobuf body."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.arrived = threading.Condition()
        self.url = ""

    def add(self, body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        found = [
            Span(
                span.name,
                span.trace_id.hex(),
                span.span_id.hex(),
                span.parent_span_id.hex(),
                span.kind,
                {a.key: _value(a.value) for a in span.attributes},
            )
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.arrived:
            self.spans.extend(found)
            self.arrived.notify_all()

    def trace(self, trace_id: str, *names: str, timeout: float = 30) -> list[Span]:
        """The spans of ``trace_id`` once spans of every name in ``names`` arrived."""

        def complete() -> bool:
            have = {s.name for s in self.spans if s.trace_id == trace_id}
            return set(names) <= have

        with self.arrived:
            if not self.arrived.wait_for(complete, timeout):
                have = sorted({s.name for s in self.spans if s.trace_id == trace_id})
                raise AssertionError(f"trace {trace_id}: wanted {names}, have {have}")
            return [s for s in self.spans if s.trace_id == trace_id]


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@contextmanager
def collector() -> Iterator[Collector]:
    found = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            assert self.path == "/v1/traces"
            assert self.headers["content-type"] == "application/x-protobuf"
            found.add(body)
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def traceparent() -> tuple[str, str, str]:
    """(header, trace id, span id) of a sampled caller span."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def one(spans: list[Span], name: str) -> Span:
    named = [s for s in spans if s.name == name]
    assert len(named) == 1, (name, [s.name for s in spans])
    return named[0]


def below(spans: list[Span], top: Span) -> list[Span]:
    """Every descendant of ``top`` in ``spans``."""
    children: dict[str, list[Span]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    found, todo = [], [top]
    while todo:
        for child in children.get(todo.pop().span_id, []):
            found.append(child)
            todo.append(child)
    return found


SERVER, CLIENT = 2, 3  # OTLP's SpanKind numbers


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, Collector, Receiver]]:
    tmp: Path = tmp_path_factory.mktemp("tracing")
    with collector() as found, receiver() as hooks, pytest.MonkeyPatch.context() as env:
        # The batch processor's delay (5 s by default) shortened: spans arrive within the test.
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        flags = [
            # info: the access log's lines carry the trace id
            *(f for f in base_flags("sqlite", fresh_sqlite_url(tmp)) if f != "--log-level=warn"),
            f"--memory-store-url={fresh_redis_url()}",
            f"--otel-traces-endpoint={found.url}",
            "--webhook-allow-private-targets",
        ]
        with running(flags, tmp) as server:
            yield server, found, hooks


def test_a_rest_login_is_one_trace_under_the_callers_span(
    traced: tuple[ServerProcess, Collector, Receiver],
) -> None:
    server, found, hooks = traced
    email = unique_email()
    with client_for(server) as client:
        added = client.post(
            "/v1/admin/add_webhook",
            json={"event_name": "user.login", "endpoint": hooks.url, "enabled": True},
            headers=ADMIN,
        )
        assert added.status_code == 200, added.text
        assert signup(client, email).status_code == 200
        header, trace_id, caller_span = traceparent()
        answer = client.post(
            "/v1/login",
            json={"email": email, "password": PASSWORD},
            headers={"traceparent": header},
        )
        assert answer.status_code == 200, answer.text
    spans = found.trace(trace_id, "POST /v1/login", "AuthService.login", "argon2 verify")
    request = one(spans, "POST /v1/login")
    assert (request.parent_id, request.kind) == (caller_span, SERVER)
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["http.route"] == "/v1/login"
    operation = one(spans, "AuthService.login")
    assert operation.parent_id == request.span_id
    inside = below(spans, operation)
    assert "argon2 verify" in {s.name for s in inside}
    statements = [s for s in inside if s.attributes.get("db.system.name") == "sqlite"]
    assert {"SELECT", "INSERT"} <= {s.name for s in statements}
    assert all(s.kind == CLIENT and s.attributes["db.query.text"] for s in statements)
    # the per-IP rate limit's round trip to Redis, before the operation
    redis = [s for s in below(spans, request) if s.attributes.get("db.system.name") == "redis"]
    assert redis, [s.name for s in spans]
    # Every line the server logged for the request carries the trace id.
    lines = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
    logged = [
        line for line in lines if line.get("path") == "/v1/login" and line.get("status") == 200
    ]
    assert logged
    assert all(line["trace_id"] == trace_id for line in logged)

    # The login's webhook: delivered by the outbox in a trace of its own, whose
    # traceparent the receiver gets.
    delivered = next(r for r in hooks.wait_for(1) if r.json["user"]["email"] == email)
    version, hook_trace, hook_parent, flags = delivered.headers["traceparent"].split("-")
    assert version == "00"
    assert int(flags, 16) & 1  # sampled
    hook_spans = found.trace(hook_trace, "webhook POST", "outbox webhook_delivery")
    post = one(hook_spans, "webhook POST")
    assert (post.span_id, post.kind) == (hook_parent, CLIENT)
    assert post.parent_id == one(hook_spans, "outbox webhook_delivery").span_id
    assert post.attributes["http.response.status_code"] == 200


def test_a_graphql_check_and_a_grpc_login(
    traced: tuple[ServerProcess, Collector, Receiver],
) -> None:
    server, found, _ = traced
    who = uid()
    email = unique_email()
    with client_for(server) as client:
        admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
        admin(
            client, "/v1/admin/fga/tuples", {"tuples": [tuple_(who, "viewer", f"document:{who}")]}
        )
        assert signup(client, email).status_code == 200
        header, trace_id, caller_span = traceparent()
        answer = client.post(
            "/graphql",
            json={
                "query": "query Check($p: CheckPermissionsInput!) { check_permissions(params: $p)"
                " { results { allowed } } }",
                "variables": {
                    "p": {
                        "user": who,
                        "checks": [{"relation": "can_view", "object": f"document:{who}"}],
                    }
                },
                "operationName": "Check",
            },
            headers={**ADMIN, "traceparent": header},
        )
        assert answer.json()["data"]["check_permissions"]["results"] == [{"allowed": True}]
    spans = found.trace(trace_id, "POST /graphql", "graphql", "FgaService.check_permissions")
    request = one(spans, "POST /graphql")
    assert request.parent_id == caller_span
    document = one(spans, "graphql")
    assert document.parent_id == request.span_id
    assert document.attributes["graphql.operation.name"] == "Check"
    check = one(spans, "FgaService.check_permissions")
    assert check.parent_id == document.span_id
    evaluated = one(spans, "fga check")
    document_id = f"document:{who}"
    assert evaluated.parent_id == check.span_id
    assert evaluated.attributes == {
        "fga.checks": 1,
        "fga.relation": "can_view",
        "fga.object": document_id,
    }
    # the engine's reads, fetched between its rounds, are below the check
    assert any(s.name == "SELECT" for s in below(spans, evaluated)), [s.name for s in spans]

    header, trace_id, caller_span = traceparent()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        stub.Login(
            authorizer_pb2.LoginRequest(email=email, password=PASSWORD),
            metadata=[("traceparent", header)],
        )
    name = "authorizer.v1.AuthorizerService/Login"
    spans = found.trace(trace_id, name, "AuthService.login", "argon2 verify")
    call = one(spans, name)
    assert (call.parent_id, call.kind) == (caller_span, SERVER)
    assert call.attributes["rpc.system"] == "grpc"
    operation = one(spans, "AuthService.login")
    assert operation.parent_id == call.span_id
    assert "argon2 verify" in {s.name for s in below(spans, operation)}


def test_a_new_trace_when_the_caller_sends_none(
    traced: tuple[ServerProcess, Collector, Receiver],
) -> None:
    server, found, _ = traced
    with client_for(server) as client:
        answer = client.get("/v1/meta", headers={"traceparent": "not-a-traceparent"})
    assert answer.status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with found.arrived:
            roots = [s for s in found.spans if s.name == "GET /v1/meta"]
            if roots:
                break
            found.arrived.wait(1)
    (root,) = roots
    assert root.parent_id == ""


def test_a_caller_that_does_not_sample_is_followed(
    traced: tuple[ServerProcess, Collector, Receiver],
) -> None:
    server, found, _ = traced
    unsampled, left_out = secrets.token_hex(16), secrets.token_hex(8)
    header, trace_id, _ = traceparent()
    with client_for(server) as client:
        for parent in (f"00-{unsampled}-{left_out}-00", header):
            answer = client.get("/v1/meta", headers={"traceparent": parent})
            assert answer.status_code == 200
    found.trace(trace_id, "GET /v1/meta", "Service.meta")  # sent after the unsampled one
    assert [s for s in found.spans if s.trace_id == unsampled] == []
    lines = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
    assert unsampled in {line.get("trace_id") for line in lines}


def test_nothing_of_the_tracing_sdk_is_loaded_when_tracing_is_off() -> None:
    """(redis-py imports OpenTelemetry's metrics API for itself when it is installed.)"""
    program = (
        "import sys, bastion.server, bastion.web\n"
        "from bastion.service import tracing\n"
        "loaded = ('opentelemetry.sdk.trace', 'opentelemetry.exporter', 'opentelemetry.proto')\n"
        "print(tracing.enabled(), sorted(m for m in sys.modules if m.startswith(loaded)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False []"
