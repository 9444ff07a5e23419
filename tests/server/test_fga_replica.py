"""The authorization engine on a read replica (``--database-replica-url``), with a real
PostgreSQL primary and streaming standby (asynchronous: the standby may be paused or
stopped without holding the primary's commits).

Two server processes share the primary: ``reader`` follows the standby, ``writer`` is
another instance writing tuples. With the standby's replay paused, the reader's plain
check misses the writer's new tuple (it reads the replica) while a HIGHER_CONSISTENCY
check sees it (the primary); the reader's own write is seen at once and lands on the
primary only; with the standby stopped the reader answers from the primary, says so in
its log and metrics, and stays ready."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.postgres_standby import StandbyPair, standby_pair
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_failover_redis import metric

API_KEY = "replica-test-key"
STORE = "00000000000000000000000000"
MODEL = """model
  schema 1.1

type user

type document
  relations
    define viewer: [user]
"""


@pytest.fixture
def pair() -> Iterator[StandbyPair]:
    with standby_pair(synchronous=False) as found:
        with psycopg.connect(found.primary.dsn(), autocommit=True) as conn:
            conn.execute("create database bastion")
        yield found


def admin(server: ServerProcess) -> httpx.Client:
    headers = {"origin": server.url, "x-service-admin-secret": ADMIN_SECRET}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def grant(server: ServerProcess, user: str) -> None:
    tuples = [{"user": user, "relation": "viewer", "object": "document:1"}]
    with admin(server) as http:
        response = http.post("/v1/admin/fga/tuples", json={"tuples": tuples})
    assert response.status_code == 200, response.text


def check(server: ServerProcess, user: str, consistency: str = "") -> bool:
    body: dict[str, object] = {
        "tuple_key": {"user": user, "relation": "viewer", "object": "document:1"}
    }
    if consistency:
        body["consistency"] = consistency
    response = httpx.post(
        f"{server.url}/stores/{STORE}/check",
        json=body,
        headers={"authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return bool(response.json()["allowed"])


def reads(server: ServerProcess, outcome: str) -> float:
    return metric(server, f'bastion_fga_replica_reads_total{{outcome="{outcome}"}}')


def until(condition: object, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def on(dsn: str, sql: str) -> object:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
        return None if row is None else row[0]


def viewers(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("select \"user\" from service_fga_tuples where relation = 'viewer'")
        return {row[0] for row in rows}


def test_engine_reads_follow_the_replica(pair: StandbyPair, tmp_path: Path) -> None:
    primary, standby = pair.primary.dsn("bastion"), pair.standby.dsn("bastion")
    flags = [*base_flags("postgres", primary), f"--openfga-api-key={API_KEY}"]
    with (
        running(flags, tmp_path, name="writer") as writer,
        running([*flags, f"--database-replica-url={standby}"], tmp_path, name="reader") as reader,
    ):
        with admin(writer) as http:
            assert http.post("/v1/admin/fga/model", json={"dsl": MODEL}).status_code == 200
        grant(writer, "user:ann")
        until(lambda: check(reader, "user:ann"))
        assert reads(reader, "replica") > 0
        sessions = "select count(*) from pg_stat_activity where datname = 'bastion'"
        assert int(on(pair.standby.dsn(), sessions)) > 0  # type: ignore[call-overload]

        # Replay paused: the standby stops at what it has.
        on(pair.standby.dsn(), "select pg_wal_replay_pause()")
        until(lambda: on(pair.standby.dsn(), "select pg_get_wal_replay_pause_state()") == "paused")
        grant(writer, "user:bob")
        assert not check(reader, "user:bob")  # the replica's answer: not there yet
        assert not check(reader, "user:bob", "MINIMIZE_LATENCY")
        assert check(reader, "user:bob", "HIGHER_CONSISTENCY")  # the primary's
        assert check(reader, "user:bob")  # and the engine never goes back

        # The reader's own write: on the primary (the standby, read-only and paused,
        # has not got it), and its next check sees it.
        behind = reads(reader, "behind")
        grant(reader, "user:carol")
        assert check(reader, "user:carol")
        assert reads(reader, "behind") > behind
        assert "user:carol" in viewers(primary)
        assert "user:carol" not in viewers(standby)
        on(pair.standby.dsn(), "select pg_wal_replay_resume()")
        until(lambda: "user:carol" in viewers(standby))

        bad = httpx.post(
            f"{reader.url}/stores/{STORE}/check",
            json={"tuple_key": {"user": "user:ann", "relation": "viewer", "object": "document:1"},
                  "consistency": "EVENTUALLY"},
            headers={"authorization": f"Bearer {API_KEY}"},
        )  # fmt: skip
        assert bad.status_code == 400
        assert bad.json()["code"] == "validation_error"

        # The replica down: the primary answers, readiness holds, the log and metrics say so.
        pair.stop_standby()
        grant(writer, "user:dan")
        assert check(reader, "user:dan")
        assert reads(reader, "unavailable") > 0
        assert httpx.get(f"{reader.url}/readyz").status_code == 200
        assert metric(reader, "bastion_fga_replica_up") == 0
        assert "read replica unavailable" in reader.stderr()

        # Back: a readiness probe finds it, and reads go there again.
        pair.start_standby()
        until(lambda: httpx.get(f"{reader.url}/readyz").status_code == 200 and
              metric(reader, "bastion_fga_replica_up") == 1)  # fmt: skip
        assert "read replica back" in reader.stderr()
        answered = reads(reader, "replica")
        until(lambda: check(reader, "user:dan") and reads(reader, "replica") > answered)
