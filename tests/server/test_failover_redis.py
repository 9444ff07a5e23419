"""bastion rides through a Redis Sentinel failover: two bastion processes share
PostgreSQL and a Sentinel-watched Redis (one master, one replica, three sentinels); under
steady signup + login + validate load from four clients the master is killed. The
sentinels promote the replica, both processes keep serving without a restart, every
request that failed during the switch got 503 ``unavailable``, and every session made
before the kill (all replicated: WAIT) still validates afterwards."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.dbfixtures import fresh_postgres_url
from tests.redis_topologies import SentinelSet, sentinel_set
from tests.server.harness import ServerProcess, base_flags, running, start_server

PASSWORD = "Failover!pass1"
CLIENTS = 4


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    with sentinel_set(tmp_path / "redis") as found:
        yield found


def metric(server: ServerProcess, series: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics").text
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {series} in /metrics")


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30)


def _signup(http: httpx.Client) -> tuple[str, httpx.Response]:
    email = f"rf-{uuid.uuid4().hex[:12]}@failover.example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    return email, http.post("/v1/signup", json=body)


def _valid(http: httpx.Client, token: str) -> httpx.Response:
    return http.post("/v1/validate_jwt_token", json={"token_type": "access_token", "token": token})


def test_two_processes_ride_through_a_sentinel_failover(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    flags = [
        *base_flags("postgres", fresh_postgres_url("redis-failover")),
        f"--memory-store-url={sentinels.url()}",
        "--url=http://bastion.failover.test",
    ]
    first = start_server(flags, tmp_path, name="first")
    try:
        with running(flags, tmp_path, name="second") as second:
            servers = [first, second]
            with _client(first) as http:
                before = []
                for _ in range(10):
                    _, answer = _signup(http)
                    assert answer.status_code == 200, answer.text
                    before.append(answer.json()["access_token"])
            # Everything written so far is on the replica.
            assert sentinels.master.client().wait(1, 5000) == 1

            answers: Counter[tuple[str, int, str]] = Counter()
            lock = threading.Lock()
            stop = threading.Event()

            def load(index: int) -> None:
                targets = itertools.cycle(servers[index % 2 :] + servers[: index % 2])
                for _ in range(300):  # bounded
                    if stop.is_set():
                        return
                    with _client(next(targets)) as http:
                        for step in ("signup", "login", "validate"):
                            try:
                                if step == "signup":
                                    email, response = _signup(http)
                                elif step == "login":
                                    response = http.post(
                                        "/v1/login", json={"email": email, "password": PASSWORD}
                                    )
                                else:
                                    token = response.json().get("access_token", "")
                                    response = _valid(http, token)
                                status = response.status_code
                                code = response.json().get("code", "") if status != 200 else ""
                            except httpx.HTTPError as exc:
                                status, code = 0, type(exc).__name__
                            with lock:
                                answers[(step, status, code)] += 1
                            if status != 200:
                                break

            threads = [threading.Thread(target=load, args=(i,)) for i in range(CLIENTS)]
            for thread in threads:
                thread.start()
            time.sleep(2)
            old_master = sentinels.current_master_port()
            sentinels.master.kill()
            deadline = time.monotonic() + 60
            while sentinels.current_master_port() == old_master:
                assert time.monotonic() < deadline, "the sentinels never promoted the replica"
                time.sleep(0.2)
            time.sleep(4)
            stop.set()
            for thread in threads:
                thread.join(60)

            assert all(s.process.poll() is None for s in servers)
            for server in servers:
                assert metric(server, 'bastion_store_failovers_total{store="memory"}') >= 1
                with _client(server) as http:
                    for token in before:
                        answer = _valid(http, token)
                        assert answer.status_code == 200, answer.text
                        assert answer.json()["is_valid"] is True
                    _, fresh = _signup(http)
                    assert fresh.status_code == 200, fresh.text
    finally:
        first.terminate()

    failures = {key: n for key, n in answers.items() if key[1] != 200}
    assert sum(n for key, n in answers.items() if key[1] == 200) > 0
    assert all(code == "unavailable" and status == 503 for _, status, code in failures), failures
