"""A real server process on PostgreSQL: storage outages and graceful shutdown."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import grpc
import httpx
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests import dbfixtures
from tests.server.harness import base_flags, running, start_server
from tests.server.tcp_proxy import TcpProxy


def _libpq(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


def _grpc_health(port: int, timeout: float = 30) -> Any:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout).status


def test_health_reports_storage_outage_and_recovery(tmp_path: Path) -> None:
    url = dbfixtures.fresh_postgres_url("outage")
    parts = httpx.URL(url)
    proxy = TcpProxy(parts.host, parts.port or 5432)
    proxy.start()
    proxied = url.replace(f":{parts.port}/", f":{proxy.port}/")
    try:
        with running(base_flags("postgres", proxied), tmp_path) as srv:
            assert httpx.get(srv.url + "/healthz").json() == {"status": "ok"}
            proxy.cut()
            # Liveness stays: the process answers, so nobody restarts it for the outage.
            alive = httpx.get(srv.url + "/healthz", timeout=60)
            assert alive.status_code == 200
            assert alive.json() == {"status": "ok"}
            not_ready = httpx.get(srv.url + "/readyz", timeout=60)
            assert not_ready.status_code == 503
            assert not_ready.json() == {"status": "not ready", "error": "database unavailable"}
            assert _grpc_health(srv.grpc_port) == health_pb2.HealthCheckResponse.NOT_SERVING
            proxy.start()
            deadline = time.monotonic() + 60
            while httpx.get(srv.url + "/readyz", timeout=60).status_code != 200:
                assert time.monotonic() < deadline, "storage did not come back"
                time.sleep(0.2)
            assert _grpc_health(srv.grpc_port) == health_pb2.HealthCheckResponse.SERVING
    finally:
        proxy.cut()


def _waiting_on_locks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity"
            " where wait_event_type = 'Lock' and datname = current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_graceful_shutdown_lets_http_and_grpc_calls_in_flight_finish(tmp_path: Path) -> None:
    url = dbfixtures.fresh_postgres_url("shutdown")
    dsn = _libpq(url)
    server = start_server(base_flags("postgres", url), tmp_path)
    results: dict[str, Any] = {}

    def http_call() -> None:
        results["http"] = httpx.get(server.url + "/readyz", timeout=60)

    def grpc_call() -> None:
        results["grpc"] = _grpc_health(server.grpc_port, timeout=60)

    try:
        with psycopg.connect(dsn) as locker:
            # Readiness reads the schema: with the users table locked, both calls wait on it.
            locker.execute("lock table service_users in access exclusive mode")
            threads = [threading.Thread(target=f) for f in (http_call, grpc_call)]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while _waiting_on_locks(dsn) < 2:
                assert time.monotonic() < deadline, "calls never reached the database"
                time.sleep(0.05)
            server.process.send_signal(15)
            time.sleep(0.5)
            assert server.process.poll() is None, "server exited with calls in flight"
            locker.rollback()
        for t in threads:
            t.join(60)
        assert results["http"].status_code == 200
        assert results["http"].json() == {"status": "ready"}
        assert results["grpc"] == health_pb2.HealthCheckResponse.SERVING
        assert server.process.wait(60) == 0
    finally:
        server.terminate()


def test_a_transaction_whose_connection_died_before_commit_runs_once_more(tmp_path: Path) -> None:
    """The pool's connections die (a database restart, a failover behind one address): the
    next calls find them dead before anything was committed and run again on new ones, so
    users see answers, not 503s, and nothing is written twice."""
    url = dbfixtures.fresh_postgres_url("replay")
    parts = httpx.URL(url)
    proxy = TcpProxy(parts.host, parts.port or 5432)
    proxy.start()
    proxied = url.replace(f":{parts.port}/", f":{proxy.port}/")
    password = {"password": "Str0ng!pass", "confirm_password": "Str0ng!pass"}
    try:
        with running(base_flags("postgres", proxied), tmp_path) as srv, srv.client() as http:
            for n in range(3):  # the pool holds live connections
                signed = http.post("/v1/signup", json={"email": f"r{n}@example.com", **password})
                assert signed.status_code == 200, signed.text
            proxy.reset()
            signed = http.post("/v1/signup", json={"email": "after@example.com", **password})
            assert signed.status_code == 200, signed.text
            for n in range(3):
                login = http.post(
                    "/v1/login", json={"email": f"r{n}@example.com", "password": "Str0ng!pass"}
                )
                assert login.status_code == 200, login.text
            metrics = httpx.get(f"http://127.0.0.1:{srv.metrics_port}/metrics").text
            replayed = [
                line for line in metrics.splitlines()
                if line.startswith('bastion_store_replayed_total{store="database"}')
            ]  # fmt: skip
            assert replayed, metrics
            assert float(replayed[0].split()[-1]) >= 1
        with psycopg.connect(_libpq(url)) as conn:
            row = conn.execute(
                "select count(*) from service_users where email = 'after@example.com'"
            ).fetchone()
            assert row == (1,)
    finally:
        proxy.cut()
