"""The background prune under login load: does deleting millions of audit rows slow logins?

A fresh PostgreSQL database gets ``--rows`` audit rows, all past retention (one SQL
``INSERT ... SELECT generate_series``). A server (the real command, SQLite-free: PostgreSQL
with Redis) then serves password logins from ``--callers`` threads for ``--seconds``
twice: first with the prune off (``--prune-interval=0``), then with it on
(``--prune-interval=1 --audit-log-retention-days=1``), which deletes the rows in batches
while the logins run. Printed: logins/s, p50/p99 latency of each run, and how many rows the
prune deleted in the second run (from ``bastion_pruned_rows_total``).
Run: ``.venv/bin/python bench/retention.py [--rows 1000000] [--callers 8] [--seconds 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import base_flags, running  # noqa: E402

PASSWORD = "Retention!pass1"
DAY = 86_400


def fill(url: str, rows: int) -> float:
    started = time.perf_counter()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    old = int(time.time()) - 30 * DAY
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "insert into service_audit_logs (id, action, actor_type, created_at) "
                "select md5(g::text), 'bench.old', 'user', :old - g % 1000 "
                "from generate_series(1, :rows) as g"
            ),
            {"old": old, "rows": rows},
        )
    engine.dispose()
    return time.perf_counter() - started


def logins(url: str, emails: list[str], seconds: float) -> list[float]:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def caller(email: str) -> None:
        with httpx.Client(base_url=url, headers={"origin": url}, timeout=60) as http:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                answer = http.post("/v1/login", json={"email": email, "password": PASSWORD})
                elapsed = time.perf_counter() - started
                assert answer.status_code == 200, answer.text
                with lock:
                    latencies.append(elapsed)

    threads = [threading.Thread(target=caller, args=(email,)) for email in emails]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def pruned(metrics_url: str) -> float:
    """Summed over the workers (the parent labels each sample with its worker)."""
    text = httpx.get(metrics_url).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("bastion_pruned_rows_total{") and 'table="audit_logs"' in line
    )


def run(args: argparse.Namespace, prune: bool, database: str, emails: list[str]) -> None:
    tmp = Path(f"/tmp/bastion-retention-bench-{prune}")
    tmp.mkdir(exist_ok=True)
    flags = [f for f in base_flags("postgres", database) if not f.startswith("--rate-limit")]
    flags += [f"--memory-store-url={fresh_redis_url()}", "--rate-limit-rps=0", "--workers=2",
              "--url=http://127.0.0.1"]  # fmt: skip
    flags += (
        ["--prune-interval=1", "--audit-log-retention-days=1"] if prune else ["--prune-interval=0"]
    )
    with running(flags, tmp, name="retention") as server:
        if not prune:
            with server.client() as http:
                for email in emails:
                    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
                    http.post("/v1/signup", json=body)
        metrics = f"http://127.0.0.1:{server.metrics_port}/metrics"
        started = time.perf_counter()
        latencies = logins(server.url, emails, args.seconds)
        wall = time.perf_counter() - started
        deleted = pruned(metrics)
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(
        f"prune {'on ' if prune else 'off'}: {len(latencies) / wall:7.1f} logins/s  "
        f"p50 {statistics.median(latencies) * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  "
        f"audit rows pruned meanwhile {deleted:,.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    database = fresh_postgres_url("retention-bench")
    # migrated by a first start (the "off" run's server), then filled, then measured
    emails = [f"bench-{i}@example.com" for i in range(args.callers)]
    with running([*base_flags("postgres", database)], Path("/tmp"), name="migrate"):
        pass
    print(f"filled {args.rows:,} audit rows in {fill(database, args.rows):.1f} s")
    run(args, False, database, emails)
    run(args, True, database, emails)


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
