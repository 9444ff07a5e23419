"""What tracing costs on the fast path (issue 42 item 10).

bastion (``--workers 2``, h11, PostgreSQL + Redis) three ways: tracing off, on at
``--otel-traces-sample-ratio 1.0`` and at 0.01, each sending to a real OTLP/HTTP receiver
in this process (the tests' one); ``POST /v1/validate_jwt_token`` under ``wrk -t1 -c16``,
the three servers in turn, ``--rounds`` times. Then, in this process, the cost of one
span (started and ended, batched for export) against one SQL statement's: what decided
one span per statement rather than per transaction. Run:
``.venv/bin/python bench/tracing.py [--seconds 8] [--rounds 2]`` (needs ``wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.cli import parse_args  # noqa: E402
from bastion.service import tracing  # noqa: E402
from bench.http_servers import POST_SCRIPT, _wrk  # noqa: E402
from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, running  # noqa: E402
from tests.server.test_tracing import Collector, collector  # noqa: E402

PASSWORD = "Bench!pass1"
CONFIGS = {"off": [], "on, ratio 1.0": ["1.0"], "on, ratio 0.01": ["0.01"]}


def validate_rates(seconds: int, rounds: int, found: Collector, tmp: Path) -> dict[str, list]:
    url = fresh_postgres_url("bench-tracing")
    kept = ("--log-level", "--rate-limit")
    base = [
        *(f for f in base_flags("postgres", url) if not f.startswith(kept)),
        f"--memory-store-url={fresh_redis_url()}",
        "--log-level=warn",
        "--rate-limit-rps=0",
        "--workers=2",
    ]
    rates: dict[str, list] = {name: [] for name in CONFIGS}
    for round_ in range(rounds):
        for name, ratio in CONFIGS.items():
            flags = list(base)
            if ratio:
                flags += [
                    f"--otel-traces-endpoint={found.url}",
                    f"--otel-traces-sample-ratio={ratio[0]}",
                ]
            with running(flags, tmp, name=f"tracing-{round_}") as server:
                origin = {"origin": server.url}
                with httpx.Client(base_url=server.url, timeout=60) as client:
                    email = f"bench-{time.time_ns()}@example.com"
                    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
                    reply = client.post("/v1/signup", json=body, headers=origin)
                    assert reply.status_code == 200, reply.text
                token = reply.json()["access_token"]
                validate = {"token_type": "access_token", "token": token}
                script = tmp / "validate.lua"
                script.write_text(
                    POST_SCRIPT
                    % {"body": json.dumps(validate), "origin": server.url, "secret": ADMIN_SECRET}
                )
                spans_before = len(found.spans)
                result = _wrk(
                    server.process.pid, server.url + "/v1/validate_jwt_token", seconds, script
                )
                time.sleep(1)  # the last batch
                result["spans"] = len(found.spans) - spans_before
                rates[name].append(result)
                if result["errors"]:
                    failed = [line for line in server.stderr().splitlines() if "error" in line]
                    print("\n".join(failed[:5]))
                print(name, {k: round(v, 2) for k, v in result.items()}, flush=True)
    return rates


def span_cost(found: Collector, count: int = 20_000) -> tuple[float, float]:
    """(microseconds per span, microseconds per SQLite statement) in this process."""
    settings = parse_args([*base_flags("sqlite", "x.db"), f"--otel-traces-endpoint={found.url}"])
    engine = sa.create_engine("sqlite://")
    with engine.connect() as conn:
        started = time.perf_counter()
        for _ in range(count):
            conn.execute(sa.text("SELECT 1")).scalar()
        statement = (time.perf_counter() - started) / count * 1e6
    with tracing.started(settings):
        started = time.perf_counter()
        for _ in range(count):
            with tracing.span("bench", new_trace=True):
                pass
        per_span = (time.perf_counter() - started) / count * 1e6
    return per_span, statement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "200"
    print(f"uptime: {os.popen('uptime').read().strip()}")
    with collector() as found, tempfile.TemporaryDirectory() as tmp:
        rates = validate_rates(args.seconds, args.rounds, found, Path(tmp))
        per_span, statement = span_cost(found)
    print(f"\nuptime: {os.popen('uptime').read().strip()}")
    print("| tracing | validate req/s (median) | p99 ms | server CPU ms/req | spans sent |")
    print("|---|---|---|---|---|")
    for name, results in rates.items():
        rps = statistics.median(r["rps"] for r in results)
        p99 = statistics.median(r["p99_ms"] for r in results)
        cpu = statistics.median(r["cpu_ms"] for r in results)
        spans = sum(r["spans"] for r in results)
        print(f"| {name} | {rps:,.0f} | {p99:.1f} | {cpu:.3f} | {spans:,} |")
    print(f"\none span: {per_span:.1f} us; one SQLite `SELECT 1`: {statement:.1f} us")


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
