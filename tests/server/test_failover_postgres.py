"""bastion rides through a PostgreSQL failover: a primary with a synchronous streaming
standby, named together in one libpq multi-host --database-url; under steady signups the
primary is killed and the standby promoted. bastion reconnects by itself (no restart);
every signup answered 200 is in the new primary exactly once; a signup that failed got
503 ``unavailable`` (never 500), and its identical retry afterwards succeeds or finds the
account."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.postgres_standby import StandbyPair, standby_pair
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_failover_redis import metric

PASSWORD = "Failover!pass1"
CLIENTS = 4


@pytest.fixture
def pair() -> Iterator[StandbyPair]:
    with standby_pair() as found:
        with psycopg.connect(found.primary.dsn(), autocommit=True) as conn:
            conn.execute("create database bastion")
        yield found


def signup(http: httpx.Client, email: str) -> httpx.Response:
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    return http.post("/v1/signup", json=body)


def test_signups_ride_through_a_promoted_standby(pair: StandbyPair, tmp_path: Path) -> None:
    flags = base_flags("postgres", pair.url("bastion"))
    answers: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(server: ServerProcess) -> None:
        with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
            for _ in range(400):  # bounded: at most this many signups per client
                if stop.is_set():
                    return
                email = f"fo-{uuid.uuid4().hex[:12]}@failover.example.com"
                try:
                    response = signup(http, email)
                    status = response.status_code
                    code = response.json().get("code", "") if status != 200 else ""
                except httpx.HTTPError as exc:
                    status, code = 0, type(exc).__name__
                with lock:
                    answers.append((email, status, code))

    with running(flags, tmp_path) as server:
        opened = metric(server, 'bastion_store_connections_opened_total{store="database"}')
        threads = [threading.Thread(target=client, args=(server,)) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        time.sleep(3)
        with lock:
            before = len(answers)
        pair.stop_primary()
        pair.promote()
        time.sleep(8)
        stop.set()
        for thread in threads:
            thread.join(60)
        # bastion is still the same process, and serves on the promoted standby.
        with httpx.Client(base_url=server.url, headers={"origin": server.url}) as http:
            after = signup(http, f"fo-after-{uuid.uuid4().hex[:8]}@failover.example.com")
            assert after.status_code == 200, after.text
            retried = [e for e, status, _ in answers if status != 200]
            for email in retried:
                again = signup(http, email)
                assert again.status_code in (200, 400), again.text
        assert server.process.poll() is None
        # The pool reconnected to the promoted standby by itself.
        reopened = metric(server, 'bastion_store_connections_opened_total{store="database"}')
        assert reopened > opened

    statuses = Counter((status, code) for _, status, code in answers)
    assert before > 0
    assert statuses[(200, "")] > before, statuses
    assert set(statuses) <= {(200, ""), (503, "unavailable")}, statuses
    ok = [email for email, status, _ in answers if status == 200]
    with psycopg.connect(pair.standby.dsn("bastion")) as conn:
        rows = conn.execute(
            "select email, count(*) from service_users where email like 'fo-%' group by email"
        ).fetchall()
    stored = dict(rows)
    assert all(stored.get(email) == 1 for email in ok), "an answered signup was lost"
    assert all(count == 1 for count in stored.values())
