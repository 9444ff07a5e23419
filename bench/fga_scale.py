"""The engine at scale (issue 37): a generated organisation in PostgreSQL, read on demand.

The organisation is ``bench/fga.py``'s (users, nested groups, a folder tree, documents in
folders; a probe user who sees about 10,000 documents), ``--documents`` x 3.3 tuples.
Measured, and printed as a Markdown section for ``bench/RESULTS.md``:

1. ``bastion fga import`` of it (a CSV file) into a fresh PostgreSQL database: tuples/s,
   and the bytes per tuple PostgreSQL keeps (table and indexes, changelog apart);
2. in this process, the engine as a server runs it (``EngineState`` over the SQL store,
   cache ``--cache-mib``): start to the first answered check; check latency (engine time:
   the evaluation with its reads from PostgreSQL; the freshness step before it is timed
   apart) p50/p99 for uniform cold draws, for a hot working set
   (the 10,000 most active documents and 5,000 most active users, whatever the store's
   size, drawn Zipf-like: rank ``n ** U`` for U uniform, spread over the ids; the set is
   read once first, as a server that has run a while has) and for the same Zipf-like
   draws over the whole store (a heavy tail: most draws meet a document for the first
   time); list_objects for the probe user, cold and warm;
3. a real server (``--workers 2``, PostgreSQL + Redis, default cache): start to the first
   answered check, each worker's resident memory after checks spread over the whole store
   (``--spread`` uniform checks through REST), and REST ``check_permissions`` throughput
   (1 check per request) on the hot set with wrk, when wrk is installed, after the
   working set was read through eight connections opened together (each worker its own
   cache: both read it whole) and a wrk warm-up run;
4. a projection to 100M tuples: PostgreSQL bytes, and the per-process memory (bounded by
   the cache flag, not the store).

Run: ``.venv/bin/python bench/fga_scale.py [--documents 300000] [--draws 5000]``.
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import sqlalchemy as sa
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.core.fga import RequestOptions, check, list_objects  # noqa: E402
from bastion.fga_files import CSV_COLUMNS  # noqa: E402
from bastion.service.fga.engine import EngineCaches, EngineState  # noqa: E402
from bastion.storage import StorageConfig, open_storage  # noqa: E402
from bastion.storage.fga import SqlFgaStore  # noqa: E402
from bastion.storage.sql.schema import DEFAULT_FGA_STORE  # noqa: E402
from bench.fga import Organisation, generate, rss_mib  # noqa: E402
from bench.fga_import import prepare, timed  # noqa: E402
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, start_server  # noqa: E402

#: The OpenFGA API's key on the measured server.
OPENFGA_KEY = "fga-scale-bench"

WRK_HOT = """
math.randomseed(%(seed)d)
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
wrk.headers["x-service-admin-secret"] = "%(secret)s"
request = function()
  local user = (math.floor(%(hot_users)d ^ math.random()) - 1) * %(spread)d %% %(users)d
  local doc = (math.floor(%(hot_docs)d ^ math.random()) - 1) * %(spread)d %% %(docs)d
  local body = string.format(
    '{"user":"u%%d","checks":[{"relation":"viewer","object":"document:d%%d"}]}', user, doc)
  return wrk.format(nil, nil, nil, body)
end
"""


#: The hot working set: the most active documents and users, whatever the store's size.
HOT_DOCUMENTS = 10_000
HOT_USERS = 5_000
#: Ranks are spread over the store's ids (rank x this, modulo the count: a prime).
SPREAD = 7919
#: Connections that read the working set at once before wrk (see ``through_server``).
WARM_CONNECTIONS = 8


def hot(rng: random.Random, n: int) -> int:
    """A Zipf-like rank in [0, n): ``n ** U - 1``, U uniform (log-uniform)."""
    return int(n ** rng.random()) - 1


def hot_id(rng: random.Random, working_set: int, count: int) -> int:
    """An id of the hot working set: a Zipf-like rank among ``working_set``, spread."""
    return hot(rng, min(working_set, count)) * SPREAD % count


def working_set(org: Organisation) -> list[tuple[str, str]]:
    """Every document of the hot working set once, each with a user of it: what a server
    that has run a while has read."""
    users, docs = min(HOT_USERS, org.users), min(HOT_DOCUMENTS, org.documents)
    return [
        (f"user:u{rank % users * SPREAD % org.users}", f"document:d{rank * SPREAD % org.documents}")
        for rank in range(docs)
    ]


def write_csv(path: Path, org: Organisation) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS[:6])
        for key in org.tuples:
            user_object, _, user_relation = key.user.partition("#")
            user_type, _, user_id = user_object.partition(":")
            object_type, _, object_id = key.object.partition(":")
            writer.writerow(
                [user_type, user_id, user_relation, key.relation, object_type, object_id]
            )


def stored_bytes(url: str) -> tuple[float, float]:
    """(bytes of the tuples table with its indexes, of the changelog) per tuple."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        count, tuples, log = conn.exec_driver_sql(
            "SELECT (SELECT count(*) FROM service_fga_tuples), "
            "sum(pg_total_relation_size(relid)), "
            "pg_total_relation_size('service_fga_changelog') "
            "FROM pg_partition_tree('service_fga_tuples')"
        ).one()
    engine.dispose()
    return tuples / count, log / count


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50, p99 = statistics.median(ordered), ordered[int(len(ordered) * 0.99)]
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


async def inprocess(url: str, org: Organisation, draws: int, mib: int, seed: int) -> list[str]:
    config = StorageConfig(database_type="postgres", database_url=url, timeout=600)
    rows = []
    async with open_storage(config) as storage:
        engine = EngineState(SqlFgaStore(storage.db), EngineCaches.sized(mib))
        started = time.perf_counter()
        await engine.fresh()
        model = engine.model
        assert model is not None
        ts = model.ts
        await engine.evaluate(lambda r: check(ts, r, "document:d0", "viewer", "user:u0"))
        first = time.perf_counter() - started
        rows.append(f"| in-process start to first answered check | {first * 1000:.0f} ms |")
        rng = random.Random(seed)

        freshness: list[float] = []

        async def measure(draw: Callable[[], tuple[str, str]]) -> tuple[list[float], int]:
            """Engine time (the evaluation and its reads) of ``draws`` checks; the
            freshness step before each (here a SQL revision read: a server with Redis
            reads the store's generation there instead) is timed apart."""
            samples, allowed = [], 0
            for _ in range(draws):
                user, doc = draw()
                start = time.perf_counter()
                await engine.fresh()
                fresh = time.perf_counter()
                allowed += await engine.evaluate(
                    lambda r, u=user, d=doc: check(ts, r, d, "viewer", u)
                )
                samples.append((time.perf_counter() - fresh) * 1000)
                freshness.append((fresh - start) * 1000)
            return samples, allowed

        def hot_pair() -> tuple[str, str]:
            user = hot_id(rng, HOT_USERS, org.users)
            return f"user:u{user}", f"document:d{hot_id(rng, HOT_DOCUMENTS, org.documents)}"

        def tail_pair() -> tuple[str, str]:
            return f"user:u{hot(rng, org.users)}", f"document:d{hot(rng, org.documents)}"

        def cold_pair() -> tuple[str, str]:
            return f"user:u{rng.randrange(org.users)}", f"document:d{rng.randrange(org.documents)}"

        cold, allowed = await measure(cold_pair)
        rows.append(
            f"| check, uniform cold draws ({draws}, {allowed / draws:.0%} allowed) | "
            f"{percentiles(cold)} |"
        )
        reads = engine.caches.reads
        for user, doc in working_set(org):
            await engine.evaluate(lambda r, u=user, d=doc: check(ts, r, d, "viewer", u))
        for label, pair in (
            (
                f"hot set ({HOT_USERS:,} users x {HOT_DOCUMENTS:,} documents, Zipf-like; the "
                "set read once first)",
                hot_pair,
            ),
            ("Zipf-like over the whole store (heavy tail: mostly first reads)", tail_pair),
        ):
            await measure(pair)  # warm-up
            hits, misses = reads.hits, reads.misses
            warm, _ = await measure(pair)
            ratio = (reads.hits - hits) / max(1, reads.hits - hits + reads.misses - misses)
            rows.append(
                f"| check, {label}, {draws} after as many to warm up | "
                f"{percentiles(warm)}, read-cache hit ratio {ratio:.0%} |"
            )
        rows.append(
            f"| freshness step before each check (a SQL revision read; not engine time) | "
            f"{percentiles(freshness)} |"
        )
        options = RequestOptions(max_results=0)
        # The cold list gets a new engine, as a new server process has; the old one's
        # cache is let go first (kept, its objects would sit in every full pass of the
        # cyclic collector during the list, which no server of this cache's size has).
        del reads
        for label in ("cold", "warm"):
            if label == "cold":
                engine = EngineState(SqlFgaStore(storage.db), EngineCaches.sized(mib))
                await engine.fresh()
            start = time.perf_counter()
            found = await engine.evaluate(
                lambda r: list_objects(
                    ts, r, "document", "viewer", org.probe_user, options, graph=model.graph
                )
            )
            rows.append(
                f"| list_objects, user seeing {len(found.items):,} documents, {label} | "
                f"{time.perf_counter() - start:.2f} s |"
            )
        stats = engine.caches.reads.statistics()
        rows.append(
            f"| read cache after the runs (this process) | {stats.bytes / 2**20:.0f} MiB "
            f"estimated of {stats.max_bytes / 2**20:.0f}, {stats.entries:,} answers; "
            f"process RSS {rss_mib():.0f} MiB (the generated organisation included) |"
        )
    return rows


def list_through_server(client: httpx.Client, user: str) -> str:
    """OpenFGA's ``list-objects`` for ``user`` on ``client``'s connection, whose worker has
    served the checks spread over the store (its cache full of other answers, never this
    user's), twice: its first list, then the same with its reads cached."""
    body = {"type": "document", "relation": "viewer", "user": user}
    took = []
    for _ in range(2):
        start = time.perf_counter()
        reply = client.post(
            f"/stores/{DEFAULT_FGA_STORE}/list-objects",
            json=body,
            headers={"authorization": f"Bearer {OPENFGA_KEY}"},
        )
        took.append(time.perf_counter() - start)
        reply.raise_for_status()
    found = len(reply.json()["objects"])
    return (
        f"| list_objects through the server (OpenFGA's API, on the worker that served the "
        f"checks above), user seeing {found:,} documents | first {took[0]:.2f} s, "
        f"again {took[1]:.2f} s |"
    )


def workers_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def through_server(url: str, org: Organisation, spread: int, seconds: int, seed: int) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        flags = [
            *[f for f in base_flags("postgres", url) if not f.startswith("--log-level")],
            f"--memory-store-url={fresh_redis_url()}",
            "--workers=2",
            f"--openfga-api-key={OPENFGA_KEY}",
            "--fga-list-objects-max-results=0",
            "--log-level=error",
        ]
        started = time.perf_counter()
        server = start_server(flags, Path(tmp), wait=False, console_script=True)
        headers = {"origin": server.url, "x-service-admin-secret": ADMIN_SECRET}
        body = {"user": "u0", "checks": [{"relation": "viewer", "object": "document:d0"}]}
        try:
            with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
                while True:
                    try:
                        if client.post("/v1/check_permissions", json=body).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    time.sleep(0.05)
                first = time.perf_counter() - started
                rows.append(
                    f"| server (--workers 2) start to first answered check | {first:.1f} s |"
                )
                pids = workers_of(server.process.pid) or [server.process.pid]
                before = [rss_mib(p) for p in pids]
                rng = random.Random(seed)
                begun = time.perf_counter()
                for _ in range(spread // 100):
                    user = f"u{rng.randrange(org.users)}"
                    checks = [
                        {
                            "relation": "viewer",
                            "object": f"document:d{rng.randrange(org.documents)}",
                        }
                        for _ in range(100)
                    ]
                    reply = client.post(
                        "/v1/check_permissions", json={"user": user, "checks": checks}
                    )
                    assert reply.status_code == 200, reply.text
                took = time.perf_counter() - begun
                after = [rss_mib(p) for p in pids]
                rows.append(list_through_server(client, org.probe_user))
                rows.append(
                    f"| server RSS per worker, at start / after {spread:,} uniform checks over "
                    f"the store ({spread / took:,.0f} checks/s, batches of 100) | "
                    + ", ".join(
                        f"{b:.0f} / {a:.0f} MiB" for b, a in zip(before, after, strict=True)
                    )
                    + " |"
                )
            if shutil.which("wrk") and seconds:
                script = Path(tmp) / "hot.lua"
                pairs = working_set(org)

                def read_working_set(_: int) -> None:
                    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as one:
                        for start in range(0, len(pairs), 100):
                            batch = pairs[start : start + 100]
                            checks = [{"relation": "viewer", "object": d} for _, d in batch]
                            body = {"user": batch[0][0].removeprefix("user:"), "checks": checks}
                            one.post("/v1/check_permissions", json=body).raise_for_status()

                # Connections opened together are spread over the workers (balance.py), so
                # every worker reads the whole working set (each has its own cache); one
                # connection at a time could land on one worker each time.
                with ThreadPoolExecutor(WARM_CONNECTIONS) as pool:
                    list(pool.map(read_working_set, range(WARM_CONNECTIONS)))
                for warm_up in (True, False):
                    script.write_text(
                        WRK_HOT
                        % {
                            "seed": seed + warm_up,
                            "origin": server.url,
                            "secret": ADMIN_SECRET,
                            "users": org.users,
                            "docs": org.documents,
                            "hot_users": min(HOT_USERS, org.users),
                            "hot_docs": min(HOT_DOCUMENTS, org.documents),
                            "spread": SPREAD,
                        }
                    )
                    out = subprocess.run(
                        ["wrk", "-t2", "-c16", f"-d{seconds}s", "-s", str(script),
                         server.url + "/v1/check_permissions"],
                        capture_output=True, text=True, check=True,
                    ).stdout  # fmt: skip
                rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
                rate = float(rps.group(1)) if rps else 0
                rows.append(
                    f"| REST check_permissions, 1 check/request, hot set, 16 connections, "
                    f"after a {seconds} s warm-up | {rate:,.0f} req/s |"
                )
        finally:
            server.terminate()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=300_000)
    parser.add_argument("--draws", type=int, default=5000)
    parser.add_argument("--cache-mib", type=int, default=512)
    parser.add_argument("--spread", type=int, default=50_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--imported",
        default="",
        help="URL of a database a previous run imported (same --documents and --seed): "
        "measure it again without importing",
    )
    args = parser.parse_args()
    started = time.monotonic()
    org = generate(args.documents, args.seed)
    # A server holds no generated organisation: keep its millions of objects out of the
    # cyclic collector, whose full passes would otherwise scan them inside the timings.
    gc.freeze()
    count = len(org.tuples)
    rows = []
    url = args.imported
    if not url:
        url = fresh_postgres_url("scale")
        trio.run(prepare, url)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "org.csv"
            write_csv(path, org)
            flags = ["--database-type=postgres", f"--database-url={url}"]
            took = timed(0, "import", *flags, str(path))
        rows.append(f"| `bastion fga import` | {took:.0f} s, {count / took:,.0f} tuples/s |")
    per_tuple, per_change = stored_bytes(url)
    rows.append(
        f"| PostgreSQL per tuple | {per_tuple:.0f} B (table and indexes), "
        f"{per_change:.0f} B changelog |"
    )
    rows += trio.run(inprocess, url, org, args.draws, args.cache_mib, args.seed)
    rows += through_server(url, org, args.spread, args.seconds, args.seed)
    hundred = 100_000_000
    rows.append(
        f"| projection, 100M tuples | PostgreSQL {per_tuple * hundred / 2**30:,.0f} GiB "
        f"+ {per_change * hundred / 2**30:,.0f} GiB changelog; each process: its cache bound "
        f"(--fga-cache-mib) plus the server's own, not a function of the store |"
    )
    print(f"## The engine at scale (bench/fga_scale.py, {time.strftime('%Y-%m-%d')})\n")
    print(
        f"{count:,} tuples ({org.users:,} users, {org.documents:,} documents), PostgreSQL "
        f"and Redis on this machine ({os.cpu_count()} cores, shared), "
        f"load average at the end {os.getloadavg()[0]:.1f}; run took "
        f"{time.monotonic() - started:.0f} s.\n"
    )
    print("| measure | value |\n|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
