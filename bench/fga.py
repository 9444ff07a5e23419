"""The authorization engine on a generated organisation: in-process checks, REST throughput.

The organisation (deterministic, ``--seed``): users, groups (some nested in others), a
folder tree, and documents in folders; viewers are granted on folders to groups, on
documents to users and groups, and viewing is inherited down the folder tree. About
``--documents`` x 3.3 tuples (the default, 300,000 documents, is about 1M tuples).

Measured, and printed as a Markdown section for ``bench/RESULTS.md``:

1. in-process (``core.fga`` over ``MemoryTupleReader``): index build time and its memory;
   check p50/p99 with the cache off (cold) and on (warm, after a warm-up pass over the
   same distribution) and the hit ratio, over checks drawn uniformly from (user, document)
   pairs; list_objects for a user who sees ~10,000 documents;
2. through a real server on SQLite: load into the store, server warm-up (start to the
   first answered check: the snapshot load), server resident memory, and
   ``POST /v1/check_permissions`` throughput with wrk at 16 connections, 1 and 100 checks
   per request, against one or more server processes (``--processes``) sharing the store.

Run: ``.venv/bin/python bench/fga.py [--documents 300000] [--seconds 10] [--processes 2]``.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.core.fga import MemoryTupleReader, TypeSystem, check, list_objects  # noqa: E402
from bastion.core.fga.cache import CheckCache, ScopedCache  # noqa: E402
from bastion.core.fga.dsl_parser import parse_model  # noqa: E402
from bastion.core.fga.request import RequestOptions  # noqa: E402
from bastion.core.fga.tuples import TupleKey  # noqa: E402
from bastion.storage import StorageConfig, open_storage  # noqa: E402
from bastion.storage.fga import SqlFgaStore, StoredModel  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, start_server  # noqa: E402

MODEL = """model
  schema 1.1

type user

type group
  relations
    define member: [user, group#member]

type folder
  relations
    define parent: [folder]
    define owner: [user, group#member]
    define viewer: [user, group#member] or owner or viewer from parent

type document
  relations
    define parent: [folder]
    define owner: [user]
    define editor: [user, group#member] or owner
    define viewer: [user, group#member] or editor or viewer from parent
"""

WRK_SCRIPT = """
local users = %(users)d
local docs = %(docs)d
local per = %(per)d
math.randomseed(%(seed)d)
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
wrk.headers["x-service-admin-secret"] = "%(secret)s"
request = function()
  local checks = {}
  for i = 1, per do
    checks[i] = string.format('{"relation":"viewer","object":"document:d%%d"}',
                              math.random(0, docs - 1))
  end
  local body = string.format('{"user":"u%%d","checks":[%%s]}', math.random(0, users - 1),
                             table.concat(checks, ","))
  return wrk.format(nil, nil, nil, body)
end
"""


@dataclass(frozen=True, slots=True)
class Organisation:
    tuples: list[TupleKey]
    users: int
    documents: int
    #: a user who sees about 10,000 documents through one group grant on a folder
    probe_user: str


def generate(documents: int, seed: int) -> Organisation:
    rng = random.Random(seed)
    users = max(1000, documents // 6)
    groups = max(50, documents // 150)
    folders = max(100, documents // 15)
    out: list[TupleKey] = []
    for g in range(groups):
        for u in rng.sample(range(users), 25):
            out.append(TupleKey(f"group:g{g}", "member", f"user:u{u}"))
        if g and rng.random() < 0.5:
            out.append(TupleKey(f"group:g{g}", "member", f"group:g{rng.randrange(g)}#member"))
    # A folder tree: folder i's parent is folder (i - 1) // 8, so depth ~ log8(folders).
    for f in range(1, folders):
        out.append(TupleKey(f"folder:f{f}", "parent", f"folder:f{(f - 1) // 8}"))
    for f in range(folders):
        if rng.random() < 0.5:
            out.append(TupleKey(f"folder:f{f}", "viewer", f"group:g{rng.randrange(groups)}#member"))
    # Documents: those of the probe folder's subtree are the first 10,000.
    probe_folders = _subtree(1, folders)
    others = sorted(set(range(folders)) - set(probe_folders))
    for d in range(documents):
        folder = probe_folders[d % len(probe_folders)] if d < 10_000 else rng.choice(others)
        out.append(TupleKey(f"document:d{d}", "parent", f"folder:f{folder}"))
        out.append(TupleKey(f"document:d{d}", "owner", f"user:u{rng.randrange(users)}"))
        if rng.random() < 0.7:
            out.append(TupleKey(f"document:d{d}", "viewer", f"user:u{rng.randrange(users)}"))
        else:
            out.append(
                TupleKey(f"document:d{d}", "editor", f"group:g{rng.randrange(groups)}#member")
            )
    out.append(TupleKey("group:probe", "member", "user:probe"))
    out.append(TupleKey("folder:f1", "viewer", "group:probe#member"))
    unique = {str(k): k for k in out}
    return Organisation(list(unique.values()), users, documents, "user:probe")


def _subtree(root: int, folders: int) -> list[int]:
    found, frontier = [root], [root]
    while frontier:
        frontier = [c for f in frontier for c in range(8 * f + 1, 8 * f + 9) if c < folders]
        found += frontier
    return found


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99)]


def inprocess(org: Organisation, draws: int, seed: int) -> dict[str, float]:
    ts = TypeSystem(parse_model(MODEL))
    before = rss_mib()
    started = time.perf_counter()
    reader = MemoryTupleReader(org.tuples)
    build = time.perf_counter() - started
    index_mib = rss_mib() - before
    rng = random.Random(seed)

    def run(scoped: Callable[[], ScopedCache | None]) -> tuple[list[float], int]:
        # Fresh draws every pass: the measured pass never replays the warm-up's questions.
        pairs = [
            (f"user:u{rng.randrange(org.users)}", f"document:d{rng.randrange(org.documents)}")
            for _ in range(draws)
        ]
        samples, allowed = [], 0
        for user, doc in pairs:
            start = time.perf_counter()
            allowed += check(ts, reader, doc, "viewer", user, cache=scoped())
            samples.append((time.perf_counter() - start) * 1000)
        return samples, allowed

    cold, allowed = run(lambda: None)
    cache = CheckCache(200_000)
    options = RequestOptions()
    run(lambda: cache.scoped("bench", options))  # warm-up pass
    hits, misses = cache.hits, cache.misses
    warm, _ = run(lambda: cache.scoped("bench", options))
    started = time.perf_counter()
    probe = list_objects(
        ts, reader, "document", "viewer", org.probe_user, RequestOptions(max_results=1_000_000)
    )
    listing = time.perf_counter() - started
    cold50, cold99 = _percentiles(cold)
    warm50, warm99 = _percentiles(warm)
    return {
        "tuples": len(org.tuples),
        "build_s": build,
        "index_mib": index_mib,
        "cold_p50_ms": cold50,
        "cold_p99_ms": cold99,
        "warm_p50_ms": warm50,
        "warm_p99_ms": warm99,
        "hit_ratio": (cache.hits - hits) / max(1, cache.hits - hits + cache.misses - misses),
        "allowed_share": allowed / draws,
        "list_objects_s": listing,
        "list_objects_found": len(probe.items),
    }


async def load(path: Path, org: Organisation) -> float:
    started = time.perf_counter()
    async with open_storage(StorageConfig(database_type="sqlite", database_url=str(path))) as st:
        store = SqlFgaStore(st.db)
        await store.write_model(StoredModel("01JBENCH000000000000000000", MODEL))
        for i in range(0, len(org.tuples), 20_000):
            await store.write_tuples(org.tuples[i : i + 20_000])
    return time.perf_counter() - started


def _wrk(urls: list[str], script: Path, seconds: int, connections: int) -> tuple[float, int]:
    per = max(1, connections // len(urls))
    procs = [
        subprocess.Popen(
            [
                "wrk",
                "-t1",
                f"-c{per}",
                f"-d{seconds}s",
                "-s",
                str(script),
                url + "/v1/check_permissions",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for url in urls
    ]
    rps, errors = 0.0, 0
    for proc in procs:
        out = proc.communicate()[0]
        rps += float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
        bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        errors += int(bad.group(1)) if bad else 0
    return rps, errors


def through_server(org: Organisation, seconds: int, processes: int, seed: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        db = tmp_path / "bench.db"
        load_s = trio.run(load, db, org)
        flags = [f for f in base_flags("sqlite", str(db)) if not f.startswith("--log-level")]
        servers = []
        try:
            warmups = []
            for n in range(processes):
                started = time.perf_counter()
                server = start_server([*flags, "--log-level=error"], tmp_path, name=f"s{n}")
                servers.append(server)
                body = {"user": "u0", "checks": [{"relation": "viewer", "object": "document:d0"}]}
                reply = httpx.post(
                    server.url + "/v1/check_permissions",
                    json=body,
                    timeout=600,
                    headers={"origin": server.url, "x-service-admin-secret": ADMIN_SECRET},
                )
                assert reply.status_code == 200, reply.text
                warmups.append(time.perf_counter() - started)
            urls = [s.url for s in servers]
            result = {
                "load_s": load_s,
                "warmup_s": max(warmups),
                "server_rss_mib": max(rss_mib(s.process.pid) for s in servers),
            }
            for per in (1, 100):
                script = tmp_path / f"check{per}.lua"
                script.write_text(
                    WRK_SCRIPT
                    % {
                        "users": org.users,
                        "docs": org.documents,
                        "per": per,
                        "seed": seed,
                        "origin": urls[0],
                        "secret": ADMIN_SECRET,
                    }
                )
                rps, errors = _wrk(urls, script, seconds, 16)
                result[f"rps_{per}"] = rps
                result[f"checks_per_s_{per}"] = rps * per
                result[f"errors_{per}"] = errors
            result["server_rss_after_mib"] = max(rss_mib(s.process.pid) for s in servers)
            return result
        finally:
            for server in servers:
                server.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=300_000)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-server", action="store_true")
    args = parser.parse_args()
    if shutil.which("wrk") is None and not args.skip_server:
        sys.exit("wrk is needed: apt-get install wrk")
    org = generate(args.documents, args.seed)
    local = inprocess(org, args.draws, args.seed)
    print(f"## Authorization engine (bench/fga.py, {time.strftime('%Y-%m-%d')})\n")
    print(
        f"Machine: {os.cpu_count()} cores (shared), Python {sys.version.split()[0]}. "
        f"Organisation: {org.users} users, {org.documents} documents, "
        f"{local['tuples']:.0f} tuples; checks `document#viewer` over uniform "
        f"(user, document) draws ({local['allowed_share']:.1%} allowed).\n"
    )
    print("| measure | value |\n|---|---|")
    print(f"| in-process index build | {local['build_s']:.1f} s, {local['index_mib']:.0f} MiB |")
    print(
        f"| check, cache off (cold) | p50 {local['cold_p50_ms']:.3f} ms, "
        f"p99 {local['cold_p99_ms']:.3f} ms |"
    )
    print(
        f"| check, cache on (warm) | p50 {local['warm_p50_ms']:.3f} ms, "
        f"p99 {local['warm_p99_ms']:.3f} ms, hit ratio {local['hit_ratio']:.0%} |"
    )
    print(
        f"| list_objects, user seeing {local['list_objects_found']:.0f} documents | "
        f"{local['list_objects_s']:.2f} s |"
    )
    if args.skip_server:
        return
    remote = through_server(org, args.seconds, args.processes, args.seed)
    print(f"| store load (SQLite, batches of 20,000) | {remote['load_s']:.0f} s |")
    print(f"| server warm-up (start to first check: snapshot load) | {remote['warmup_s']:.1f} s |")
    print(
        f"| server resident memory (after warm-up / after the runs) | "
        f"{remote['server_rss_mib']:.0f} / {remote['server_rss_after_mib']:.0f} MiB |"
    )
    for per in (1, 100):
        print(
            f"| REST check_permissions, {per} check(s)/request, 16 connections, "
            f"{args.processes} process(es), backend sqlite | {remote[f'rps_{per}']:.0f} req/s = "
            f"{remote[f'checks_per_s_{per}']:.0f} checks/s (non-2xx: "
            f"{remote[f'errors_{per}']:.0f}) |"
        )


if __name__ == "__main__":
    main()
