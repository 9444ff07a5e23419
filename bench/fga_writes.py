"""Tuple writes through the API from several callers at once: tuples/s together.

A server on PostgreSQL with Redis as the memory store (the shape the issue measures) and a
model; ``--callers`` callers, each with its own keep-alive connection, send writes of
``--batch`` new tuples (100, the API's limit) back to back for ``--seconds``, to the
admin API (``POST /v1/admin/fga/tuples``) or to OpenFGA's (``POST /stores/{id}/write``).
Printed: tuples/s, request latency p50/p99, refused requests, and the server's CPU per
request (from /proc).

``--bastion PATH`` runs another build's server (another checkout's ``.venv/bin/bastion``)
for a before/after comparison in the same run. Run:
``.venv/bin/python bench/fga_writes.py [--seconds 10] [--callers 1,8] [--api admin,openfga]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.fga import MODEL  # noqa: E402
from bench.http_servers import _cpu_seconds  # noqa: E402
from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server import harness  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, running  # noqa: E402

API_KEY = "bench-openfga-key-0123456789"
DEFAULT_STORE = "00000000000000000000000000"
APIS = ("admin", "openfga")


@dataclass
class Measure:
    api: str
    callers: int
    tuples_per_second: float
    p50_ms: float
    p99_ms: float
    refused: int
    cpu_ms_per_request: float


def _batch(caller: int, number: int, size: int, api: str) -> object:
    tuples = [
        {
            "user": f"user:c{caller}n{number}t{i}",
            "relation": "viewer",
            "object": f"document:c{caller}",
        }
        for i in range(size)
    ]
    if api == "admin":
        return {"tuples": tuples}
    return {"writes": {"tuple_keys": tuples}}


async def _load(url: str, api: str, callers: int, seconds: float, size: int, run: int) -> Measure:
    path = "/v1/admin/fga/tuples" if api == "admin" else f"/stores/{DEFAULT_STORE}/write"
    headers = (
        {"x-service-admin-secret": ADMIN_SECRET, "origin": url}
        if api == "admin"
        else {"authorization": f"Bearer {API_KEY}"}
    )
    latencies: list[float] = []
    refused = 0
    done = 0
    deadline = time.monotonic() + seconds

    async def caller(index: int) -> None:
        nonlocal refused, done
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            number = 0
            while time.monotonic() < deadline:
                number += 1
                body = _batch(run * 1000 + index, number, size, api)
                start = time.monotonic()
                answer = await client.post(path, json=body)
                latencies.append(time.monotonic() - start)
                if answer.status_code == 200:
                    done += size
                else:
                    refused += 1

    started = time.monotonic()
    async with trio.open_nursery() as nursery:
        for index in range(callers):
            nursery.start_soon(caller, index)
    elapsed = time.monotonic() - started
    latencies.sort()
    return Measure(
        api,
        callers,
        done / elapsed,
        statistics.median(latencies) * 1000,
        latencies[int(len(latencies) * 0.99)] * 1000,
        refused,
        0.0,
    )


def measure(
    bastion: str, apis: list[str], counts: list[int], seconds: float, size: int
) -> list[Measure]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        flags = [
            *base_flags("postgres", fresh_postgres_url("writes")),
            f"--memory-store-url={fresh_redis_url()}",
            f"--openfga-api-key={API_KEY}",
        ]
        harness.BASTION = bastion
        with running(flags, Path(tmp)) as server:
            with server.client() as admin:
                admin.headers["x-service-admin-secret"] = ADMIN_SECRET
                answer = admin.post("/v1/admin/fga/model", json={"dsl": MODEL})
                assert answer.status_code == 200, answer.text
            pid = server.process.pid
            run = 0
            for api in apis:
                for callers in counts:
                    run += 1
                    cpu = _cpu_seconds(pid)
                    found = trio.run(_load, server.url, api, callers, seconds, size, run)
                    requests = found.tuples_per_second * seconds / size + found.refused
                    found.cpu_ms_per_request = (_cpu_seconds(pid) - cpu) * 1000 / max(requests, 1)
                    results.append(found)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--callers", default="1,8", help="caller counts, comma-separated")
    parser.add_argument("--api", default="admin,openfga", help=", ".join(APIS))
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--bastion", default=harness.BASTION, help="the server to run")
    args = parser.parse_args()
    apis = args.api.split(",")
    if not set(apis) <= set(APIS):
        sys.exit(f"--api: one or more of {', '.join(APIS)}")
    counts = [int(n) for n in args.callers.split(",")]
    print(f"server: {args.bastion}")
    print("| API | callers | tuples/s | p50 ms | p99 ms | refused | server CPU ms/request |")
    print("|---|---|---|---|---|---|---|")
    for m in measure(args.bastion, apis, counts, args.seconds, args.batch):
        print(
            f"| {m.api} | {m.callers} | {m.tuples_per_second:,.0f} | {m.p50_ms:.1f} | "
            f"{m.p99_ms:.1f} | {m.refused} | {m.cpu_ms_per_request:.2f} |"
        )


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
