"""--shutdown-timeout: at SIGTERM a request in flight has that long to finish, on either
HTTP server. The request is a login waiting on ``service_users``, locked by the test
(PostgreSQL), with a ``--request-timeout`` far beyond the test; the lock is released
after the signal, sooner or later than the timeout."""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.locks import postgres_dsn, postgres_users_locked

PASSWORD = "Shutdown!pass1"
#: Long enough to mean "never" here; only a hang reaches it.
HANG = 60.0
#: How long the lock outlives the signal when the request must be cut: longer than the
#: --shutdown-timeout given (1 s), shorter than the default (10 s), so that a server
#: ignoring the flag would answer the request.
HELD_PAST_TIMEOUT = 5.0


def _wait_for_lock_waiter(dsn: str) -> None:
    """Until a statement waits for the lock on ``service_users`` (the login is in flight)."""
    query = (
        "select count(*) from pg_locks where not granted and relation = 'service_users'::regclass"
    )
    deadline = time.monotonic() + HANG
    with psycopg.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(query).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.05)
    raise AssertionError("the login never reached the locked table")


@contextlib.contextmanager
def _server_with_user(
    tmp_path: Path, http_server: str, shutdown_timeout: float
) -> Iterator[tuple[ServerProcess, str, dict[str, str]]]:
    url = fresh_postgres_url("shutdown")
    flags = [
        *base_flags("postgres", url),
        f"--memory-store-url={fresh_redis_url()}",
        f"--http-server={http_server}",
        "--request-timeout=600",
        f"--shutdown-timeout={shutdown_timeout:g}",
    ]
    credentials = {"email": f"stop-{uuid.uuid4().hex[:10]}@example.com", "password": PASSWORD}
    with running(flags, tmp_path) as server:
        with httpx.Client(base_url=server.url, headers={"origin": server.url}) as http:
            signup = {**credentials, "confirm_password": PASSWORD}
            assert http.post("/v1/signup", json=signup).status_code == 200
        yield server, postgres_dsn(url), credentials


def _login(server: ServerProcess, credentials: dict[str, str]) -> httpx.Response:
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=HANG) as http:
        return http.post("/v1/login", json=credentials)


@pytest.mark.parametrize("http_server", ["h11", "hypercorn"])
def test_a_request_in_flight_past_the_shutdown_timeout_is_cut(
    tmp_path: Path, http_server: str
) -> None:
    with (
        _server_with_user(tmp_path, http_server, 1) as (server, dsn, credentials),
        ThreadPoolExecutor(1) as pool,
    ):
        with postgres_users_locked(dsn):
            login: Future[httpx.Response] = pool.submit(_login, server, credentials)
            _wait_for_lock_waiter(dsn)
            server.process.send_signal(signal.SIGTERM)
            time.sleep(HELD_PAST_TIMEOUT)
        with pytest.raises(httpx.TransportError):
            login.result()  # the connection ended without an answer
        assert server.process.wait(HANG) == 0


@pytest.mark.parametrize("http_server", ["h11", "hypercorn"])
def test_a_request_in_flight_within_the_shutdown_timeout_completes(
    tmp_path: Path, http_server: str
) -> None:
    with (
        _server_with_user(tmp_path, http_server, 30) as (server, dsn, credentials),
        ThreadPoolExecutor(1) as pool,
    ):
        with postgres_users_locked(dsn):
            login: Future[httpx.Response] = pool.submit(_login, server, credentials)
            _wait_for_lock_waiter(dsn)
            server.process.send_signal(signal.SIGTERM)
            time.sleep(1.0)  # the stop under way, the request still waiting
            assert not login.done()
        answer = login.result()
        assert answer.status_code == 200, answer.text
        assert server.process.wait(HANG) == 0
