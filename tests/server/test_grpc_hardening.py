"""The gRPC listener under stress: deadlines, cancellation, overload, TLS, errors, rate limits.

The blocking calls are Health/Check on PostgreSQL: readiness reads ``service_users``, so a
test that holds ``lock table service_users in access exclusive mode`` makes the call's
query wait on a lock, visible in ``pg_stat_activity`` until the server cancels it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import psycopg
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
)
from bastion.transports.grpc.server import MAX_CONCURRENT_RPCS
from tests import dbfixtures
from tests.server.certificates import self_signed
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.locks import postgres_dsn, postgres_users_locked

SERVING = health_pb2.HealthCheckResponse.SERVING
#: How long a test waits for something that must happen (not a performance bound).
PATIENCE = 30.0
#: The issue's bound: the waiting query is gone within a second of the call ending.
CANCEL_BOUND = 1.0


def _wait_for(condition: Callable[[], bool], what: str, within: float = PATIENCE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _waiting_on_locks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity"
            " where wait_event_type = 'Lock' and datname = current_database()"
        ).fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture(scope="module")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    url = dbfixtures.fresh_postgres_url("grpc-hardening")
    tmp = tmp_path_factory.mktemp("grpc-hardening")
    with running(base_flags("postgres", url), tmp) as srv:
        yield srv, postgres_dsn(url)


def _health(channel: grpc.Channel) -> Any:
    return health_pb2_grpc.HealthStub(channel).Check


def test_a_call_blocked_on_a_lock_is_cancelled_at_its_deadline(
    pg_server: tuple[ServerProcess, str],
) -> None:
    srv, dsn = pg_server
    outcome: list[grpc.StatusCode] = []

    def call() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
            try:
                _health(channel)(health_pb2.HealthCheckRequest(), timeout=3)
            except grpc.RpcError as error:
                outcome.append(error.code())

    with postgres_users_locked(dsn):
        caller = threading.Thread(target=call)
        caller.start()
        _wait_for(lambda: _waiting_on_locks(dsn) == 1, "the call never waited on the lock")
        caller.join(PATIENCE)
        assert outcome == [grpc.StatusCode.DEADLINE_EXCEEDED]
        # The lock is still held: only the server cancelling it ends the query.
        _wait_for(
            lambda: _waiting_on_locks(dsn) == 0, "the query outlived its deadline", CANCEL_BOUND
        )


def test_a_call_the_client_cancels_cancels_its_query(
    pg_server: tuple[ServerProcess, str],
) -> None:
    srv, dsn = pg_server
    with (
        postgres_users_locked(dsn),
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel,
    ):
        future = _health(channel).future(health_pb2.HealthCheckRequest(), timeout=PATIENCE)
        _wait_for(lambda: _waiting_on_locks(dsn) == 1, "the call never waited on the lock")
        assert future.cancel()
        _wait_for(lambda: _waiting_on_locks(dsn) == 0, "the query outlived its call", CANCEL_BOUND)
        assert future.cancelled()


def test_overload_is_refused_at_once_rather_than_queued(
    pg_server: tuple[ServerProcess, str],
) -> None:
    srv, dsn = pg_server
    extra = 6
    with grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel:
        check = _health(channel)
        with postgres_users_locked(dsn):
            futures = [
                check.future(health_pb2.HealthCheckRequest(), timeout=PATIENCE)
                for _ in range(MAX_CONCURRENT_RPCS + extra)
            ]
            # With every slot taken by a call waiting on the lock, the extra calls end
            # while the lock is still held.
            _wait_for(lambda: sum(f.done() for f in futures) == extra, "extra calls were queued")
            refused = [f for f in futures if f.done()]
            assert {f.code() for f in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
            waiting = [f for f in futures if not f.done()]
        assert [f.result().status for f in waiting] == [SERVING] * MAX_CONCURRENT_RPCS
        # Once the slots are free again, calls are served.
        assert check(health_pb2.HealthCheckRequest(), timeout=PATIENCE).status == SERVING


def test_tls_listener_serves_tls_only(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "bastion")
    stranger, _ = self_signed(tmp_path, "stranger")
    flags = base_flags("sqlite", str(tmp_path / "bastion.db"))
    flags += [f"--grpc-tls-cert={cert}", f"--grpc-tls-key={key}"]
    with running(flags, tmp_path) as srv:
        target = f"127.0.0.1:{srv.grpc_port}"
        trusted = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(target, trusted) as channel:
            assert _health(channel)(health_pb2.HealthCheckRequest(), timeout=10).status == SERVING
            meta = authorizer_pb2_grpc.AuthorizerServiceStub(channel).Meta(
                authorizer_pb2.MetaRequest(), timeout=10
            )
            assert meta.client_id == "test-client"
        with grpc.insecure_channel(target) as plain, pytest.raises(grpc.RpcError) as refused:
            _health(plain)(health_pb2.HealthCheckRequest(), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        untrusted = grpc.ssl_channel_credentials(root_certificates=stranger.read_bytes())
        with (
            grpc.secure_channel(target, untrusted) as channel,
            pytest.raises(grpc.RpcError) as unverified,
        ):
            _health(channel)(health_pb2.HealthCheckRequest(), timeout=10)
        assert unverified.value.code() == grpc.StatusCode.UNAVAILABLE


def test_an_unexpected_failure_reaches_the_client_as_a_bare_internal_error(
    tmp_path: Path,
) -> None:
    database = tmp_path / "bastion.db"
    with (
        running(base_flags("sqlite", str(database)), tmp_path) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel,
    ):
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        admin = [("x-service-admin-secret", ADMIN_SECRET)]
        read = admin_pb2.FgaReadTuplesRequest()
        assert list(stub.FgaReadTuples(read, metadata=admin, timeout=10).tuples) == []
        # The table disappears under the running server: its query fails with a database
        # error that no part of bastion expects.
        with contextlib.closing(sqlite3.connect(database)) as conn:
            conn.execute("alter table service_fga_tuples rename to service_fga_tuples_gone")
            conn.commit()
        with pytest.raises(grpc.RpcError) as failed:
            stub.FgaReadTuples(read, metadata=admin, timeout=10)
        error: Any = failed.value
        assert error.code() == grpc.StatusCode.INTERNAL
        assert error.details() == "internal server error"
        seen = " ".join(
            [
                error.details(),
                error.debug_error_string(),
                repr(error.initial_metadata()),
                repr(error.trailing_metadata()),
            ]
        ).lower()
        for detail in ("fga_tuples", "traceback", "sqlite", "operationalerror", ".py"):
            assert detail not in seen
        # The operator's log has the cause.
        _wait_for(lambda: "service_fga_tuples" in srv.stderr(), "the failure was not logged")
        assert '"msg": "unhandled error"' in srv.stderr()


def test_the_per_ip_rate_limit_counts_grpc_and_http_calls_alike(tmp_path: Path) -> None:
    flags = [
        f for f in base_flags("sqlite", str(tmp_path / "b.db")) if not f.startswith("--rate-limit")
    ]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=2"]
    with (
        running(flags, tmp_path) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.grpc_port}") as channel,
    ):
        meta = authorizer_pb2_grpc.AuthorizerServiceStub(channel).Meta
        assert httpx.get(srv.url + "/v1/meta").status_code == 200
        assert meta(authorizer_pb2.MetaRequest(), timeout=10).client_id == "test-client"
        # REST spent the first token of the bucket: the second gRPC call is the third call.
        with pytest.raises(grpc.RpcError) as limited:
            meta(authorizer_pb2.MetaRequest(), timeout=10)
        error: Any = limited.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.details() == "Too many requests. Please try again later."
        retry_after = dict(error.trailing_metadata())["retry-after"]
        assert int(retry_after) >= 1
        # ...and the gRPC calls count against REST too.
        assert httpx.get(srv.url + "/v1/meta").status_code == 429
