"""A memory store that goes down is logged twice, not once per request: one warning when
the rate limiter first fails to reach it (no traceback), one when it answers again with
the number of calls that failed meanwhile; a counter in between. ``/readyz`` names the
store that is down; a memory store unreachable at start is named at start."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.dbfixtures import fresh_sqlite_url
from tests.redis_topologies import start_redis
from tests.server.harness import base_flags, free_port, start_server
from tests.server.test_workers import wait_for

REQUESTS = 20


def lines(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def limited_flags(tmp_path: Path, port: int) -> list[str]:
    flags = [
        flag
        for flag in base_flags("sqlite", fresh_sqlite_url(tmp_path, "outage"))
        if not flag.startswith(("--rate-limit", "--log-level"))
    ]
    return [*flags, f"--memory-store-url=redis://127.0.0.1:{port}/0", "--rate-limit-rps=1000",
            "--rate-limit-burst=1000", "--log-level=info", "--access-log=false"]  # fmt: skip


def test_a_redis_outage_is_two_lines_and_a_counter(tmp_path: Path) -> None:
    port = free_port()
    redis = start_redis(tmp_path / "redis", port=port)
    server = start_server(limited_flags(tmp_path, port), tmp_path, name="outage")
    try:
        assert httpx.get(f"{server.url}/readyz").status_code == 200
        redis.kill()
        answers = [httpx.get(f"{server.url}/v1/meta").status_code for _ in range(REQUESTS)]
        assert answers == [200] * REQUESTS  # fail-open: the limit is a guard
        not_ready = httpx.get(f"{server.url}/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json() == {"status": "not ready", "error": "memory store unavailable"}
        metrics = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics").text
        (failures,) = [
            line for line in metrics.splitlines()
            if line.startswith('bastion_store_failures_total{operation="rate limits"')
        ]  # fmt: skip
        assert float(failures.rsplit(" ", 1)[1]) >= REQUESTS
        redis = start_redis(tmp_path / "redis", port=port)
        wait_for(lambda: httpx.get(f"{server.url}/v1/meta").status_code == 200
                 and "answers rate limits again" in server.stderr())  # fmt: skip
    finally:
        server.terminate()
        redis.stop()
    logged = lines(server.stderr())
    down = [line for line in logged if str(line["msg"]).startswith("memory store unavailable")]
    assert len(down) == 1, down
    assert down[0]["msg"] == "memory store unavailable for rate limits: requests pass unlimited"
    assert "exc" not in down[0]
    (back,) = [line for line in logged if line["msg"] == "memory store answers rate limits again"]
    assert int(back["failed_calls"]) >= REQUESTS  # type: ignore[call-overload]
    assert "Traceback" not in server.stderr()


def test_a_memory_store_unreachable_at_start_is_named(tmp_path: Path) -> None:
    server = start_server(limited_flags(tmp_path, free_port()), tmp_path, name="no-redis")
    try:
        wait_for(lambda: "unreachable at start" in server.stderr())
    finally:
        server.terminate()
    (line,) = [line for line in lines(server.stderr()) if "unreachable at start" in line["msg"]]
    assert line["msg"] == "memory store unreachable at start: /readyz answers 503 until it answers"
