"""The three listeners of a real server process, over real sockets (SQLite, SQL-backed store)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.server.harness import (
    BASTION,
    ServerProcess,
    base_flags,
    free_port,
    running,
    start_server,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("listeners")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


def test_health_endpoints(server: ServerProcess) -> None:
    for path, status in (("/healthz", "ok"), ("/health", "ok"), ("/readyz", "ready")):
        response = httpx.get(server.url + path)
        assert response.status_code == 200
        assert response.json() == {"status": status}


def test_metrics_only_on_metrics_listener(server: ServerProcess) -> None:
    httpx.get(server.url + "/healthz")
    on_http = httpx.get(server.url + "/metrics")
    assert on_http.status_code == 404
    assert on_http.json()["code"] == "not_found"
    metrics = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics")
    assert metrics.status_code == 200
    text = metrics.text
    assert 'bastion_http_requests_total{method="GET",route="/healthz",status="200"}' in text
    assert "process_resident_memory_bytes" in text
    # Never a client address as a label value.
    assert "127.0.0.1" not in text


def test_grpc_health_and_reflection(server: ServerProcess) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        names = {s.name for r in responses for s in r.list_services_response.service}
        assert "grpc.health.v1.Health" in names


def test_second_process_cannot_bind_same_grpc_port(server: ServerProcess, tmp_path: Path) -> None:
    other = start_server(
        base_flags("sqlite", str(tmp_path / "other.db")),
        tmp_path,
        wait=False,
        grpc_port=server.grpc_port,
    )
    code = other.process.wait(60)
    assert code != 0
    assert "grpc" in other.stderr().lower()
    assert f"{server.grpc_port}" in other.stderr()


def test_unknown_path_and_wrong_method(server: ServerProcess) -> None:
    with server.client() as client:
        missing = client.get("/v1/no_such_endpoint")
        assert missing.status_code == 404
        assert missing.json() == {"code": "not_found", "message": "not found"}
        wrong = client.post("/v1/meta", json={})
        assert wrong.status_code == 405
        assert wrong.json() == {"code": "method_not_allowed", "message": "method not allowed"}
        assert wrong.headers["allow"] == "GET"


def test_body_must_be_a_json_object(server: ServerProcess) -> None:
    with server.client() as client:
        for raw in (b"[1, 2]", b'"text"', b"{not json", b"42"):
            response = client.post(
                "/v1/admin/login", content=raw, headers={"content-type": "application/json"}
            )
            assert response.status_code == 400, raw
            assert response.json() == {
                "code": "invalid_argument",
                "message": "request body must be a JSON object",
            }


def test_empty_body_is_an_empty_object(server: ServerProcess) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/admin/login", content=b"", headers={"content-type": "application/json"}
        )
        # Parsed as {}: the operation's own validation answers, not the body parser.
        assert response.status_code == 400
        assert response.json() == {
            "code": "invalid_argument",
            "message": "admin_secret is required",
        }


def test_unknown_fields_are_ignored(server: ServerProcess) -> None:
    with server.client() as client:
        response = client.post("/v1/admin/login", json={"admin_secret": "wrong", "extra": [1]})
        assert response.status_code == 401
        assert response.json() == {"code": "unauthenticated", "message": "invalid admin secret"}


def test_oversized_body(server: ServerProcess) -> None:
    with server.client() as client:
        big = json.dumps({"admin_secret": "x" * (2 * 1024 * 1024)})
        response = client.post(
            "/v1/admin/login", content=big, headers={"content-type": "application/json"}
        )
        assert response.status_code == 413
        assert response.json()["code"] == "resource_exhausted"


def test_openapi_lists_exactly_the_served_routes(server: ServerProcess) -> None:
    document = httpx.get(server.url + "/openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    assert set(paths["/v1/meta"]) == {"get"}
    assert set(paths["/v1/admin/login"]) == {"post"}
    for path, methods in paths.items():
        for method in methods:
            response = httpx.request(
                method.upper(),
                server.url + path,
                headers={"origin": server.url},
                json={} if method == "post" else None,
            )
            # A templated path (``/oauth_login/{provider}``) is served; its literal
            # parameter names no provider, file or asset: 404 is that resource's answer.
            refused = (405,) if "{" in path else (404, 405)
            assert response.status_code not in refused, (method, path)


def test_meta(server: ServerProcess) -> None:
    meta = httpx.get(server.url + "/v1/meta").json()
    assert meta["client_id"] == "test-client"
    assert meta["is_google_login_enabled"] is False
    assert isinstance(meta["version"], str)


def test_security_headers_on_every_response(server: ServerProcess) -> None:
    for path in ("/healthz", "/v1/nothing"):
        headers = httpx.get(server.url + path).headers
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "strict-transport-security" not in headers


def test_grpc_disabled_closes_port_and_unmounts_rest(tmp_path: Path) -> None:
    flags = [*base_flags("sqlite", str(tmp_path / "nogrpc.db")), "--enable-grpc=false"]
    with running(flags, tmp_path) as srv:
        assert httpx.get(srv.url + "/v1/meta").status_code == 404
        assert httpx.get(srv.url + "/healthz").status_code == 200
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", srv.grpc_port), 2).close()


def test_hsts_and_csp_flags(tmp_path: Path) -> None:
    flags = [*base_flags("sqlite", str(tmp_path / "h.db")), "--enable-hsts", "--disable-csp"]
    with running(flags, tmp_path) as srv:
        headers = httpx.get(srv.url + "/healthz").headers
        assert headers["strict-transport-security"].startswith("max-age=")
        assert "content-security-policy" not in headers


def test_sigterm_exits_zero(tmp_path: Path) -> None:
    srv = start_server(base_flags("sqlite", str(tmp_path / "t.db")), tmp_path)
    assert srv.terminate() == 0


def test_help_lists_flags() -> None:
    out = subprocess.run(
        [BASTION, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--database-url" in out.stdout
    assert "--enable-grpc" in out.stdout


def test_port_conflict_between_http_and_grpc_refused(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.run(
        [
            BASTION,
            f"--http-port={port}",
            f"--grpc-port={port}",
            *base_flags("sqlite", str(tmp_path / "p.db")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "port" in proc.stderr.lower()


@pytest.mark.parametrize(("flag", "server"), [("--http-port", "h11"), ("--metrics-port", "h11"),
                                             ("--http-port", "hypercorn")])  # fmt: skip
def test_a_taken_port_is_named_with_its_flag(tmp_path: Path, flag: str, server: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        others = {"--http-port": free_port(), "--metrics-port": free_port(), flag: port}
        proc = subprocess.run(
            [
                BASTION,
                "--host=127.0.0.1",
                "--metrics-host=127.0.0.1",
                f"--grpc-port={free_port()}",
                f"--http-server={server}",
                *(f"{name}={value}" for name, value in others.items()),
                *base_flags("sqlite", str(tmp_path / "p.db")),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(
        f"bastion: cannot listen on 127.0.0.1:{port} ({flag}): Address already in use"
    ), proc.stderr


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("postgresql://postgres:s3cret-pw@127.0.0.1:1/test", "Connection refused"),
        ("postgresql://postgres:s3cret-pw@127.0.0.1:5432/no_such_db_here", "does not exist"),
    ],
)
def test_an_unreachable_database_is_named_with_its_cause(url: str, cause: str) -> None:
    proc = subprocess.run(
        [BASTION, *base_flags("postgres", url)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("bastion: storage unavailable: cannot connect to the postgresql"), last
    assert cause in last
    assert "s3cret-pw" not in proc.stderr
