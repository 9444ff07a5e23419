"""The fast path's figures, all in one run on one machine (the last column: issue 39's targets).

1. The ceiling: two bare trio + h11 processes sharing one port (``bench/raw_h11.py``).
2. bastion, ``--workers 2``, h11 server, on PostgreSQL + Redis, with an organisation of
   about ``--tuples`` relationship tuples (``bench/fga.py``'s generator, loaded straight
   into the store before the server starts): ``GET /.well-known/jwks.json``,
   ``POST /v1/validate_jwt_token``, ``POST /v1/check_permissions`` with 1 check and with
   100 checks (random users and documents of the organisation), ``POST /v1/login``.
3. The raw argon2id verify rate (``bench/auth.py``'s: 16 callers on the hasher's
   cores-wide limiter, in this process) for the login ratio.
4. The same validate and check over gRPC (``bench/grpc_load.py``): 16 callers on one
   grpc.aio channel in a process of its own (one connection: one worker serves it all),
   and, when ``h2load`` is installed (``apt-get install nghttp2-client``), h2load's 16
   streams on 4 connections (both workers), a C client as wrk is for HTTP. Each row also
   gives its rate and CPU per call over the same call's HTTP figure (for check: an HTTP
   row with the gRPC rows' fixed body, measured with them). h2load counts an
   HTTP 200 as a success: the calls answered other than OK are read from the server's
   ``bastion_grpc_requests_total`` and reported as failed.
5. ``--only grpcfloor``: grpcio's floor, two bare grpcio processes on one port
   (``bench/raw_grpc.py``) answering Health/Check, plain and with the hop into trio and
   back that bastion's grpcio listener made, driven by both clients: what grpcio itself
   costs a call (the server bastion used before ``h2``), and how fast each client can
   drive a server at all.

wrk runs ``-t1 -c16`` on the same cores as the servers (the issue's shape). Server CPU
per request (from /proc, the workers included) is printed beside each rate, so a reader
can tell the server's cost from the load generator's. ``SO_REUSEPORT`` hashes the
connections onto the two workers, unevenly at times (4 gRPC connections all on one
worker halved a row's rate): a row driven over several connections is measured again
with new ones while a worker did less than 40% of the work, and the share is printed.
Run:
``.venv/bin/python bench/fast_path.py [--seconds 10] [--tuples 200000]`` (needs ``wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.storage import StorageConfig, open_storage  # noqa: E402
from bastion.storage.fga import SqlFgaStore, StoredModel  # noqa: E402
from bench.auth import LOGIN_SCRIPT, raw_verify_rate  # noqa: E402
from bench.fga import MODEL, WRK_SCRIPT, Organisation, generate  # noqa: E402
from bench.http_servers import POST_SCRIPT, _cpu_seconds, _wrk, cpu_by_process  # noqa: E402
from bench.profile_summary import report  # noqa: E402
from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, free_port, running  # noqa: E402

PASSWORD = "Bench!pass1"
LOGIN_USERS = 32
#: Authorizer's published figures on 2 vCPU (the issue's yardstick).
AUTHORIZER = {"validate": 5_670, "check": 5_001}
#: How often the ceiling is measured at most, waiting for an even spread of connections.
CEILING_ATTEMPTS = 12
#: What ``--only`` can name (all by default).
MEASURES = (
    "ceiling",
    "floor",
    "jwks",
    "validate",
    "check",
    "check100",
    "login",
    "grpc",
    "grpcfloor",
)
#: The gRPC check rows' body (a fixed body: h2load sends the same one every call), and an
#: HTTP row with the same body beside them: the HTTP check row draws random users and
#: documents, which costs more than one cached pair, so it is no yardstick for them.
SAME_CHECK: dict[str, object] = {
    "user": "u1",
    "checks": [{"relation": "viewer", "object": "document:d1"}],
}
#: A row driven over several connections is measured again (new connections) while a
#: worker did less than this share of the work: SO_REUSEPORT hashes connections onto
#: the 2 workers, unevenly often (4 gRPC connections, as 16 of wrk's for the ceiling).
EVEN_SHARE = 0.4
SPREAD_ATTEMPTS = 4
#: gRPC load generators: (label, ``bench/grpc_load.py`` options); h2load's if installed.
GRPC_DRIVERS = (
    ("grpc.aio client, 1 connection", ("--driver=python", "--channels=1")),
    ("h2load, 4 connections", ("--driver=h2load", "--channels=4")),
)


def ceiling(seconds: int, *extra: str) -> dict[str, float]:
    """Two raw h11 processes on one port (``SO_REUSEPORT``); ``extra``: their options."""
    port = free_port()
    procs = [
        subprocess.Popen([sys.executable, str(ROOT / "bench" / "raw_h11.py"), str(port), *extra])
        for _ in range(2)
    ]
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        # SO_REUSEPORT spreads wrk's 16 connections by a hash of their addresses: often
        # all on one process, which halves the ceiling. Measured again (with new
        # connections) until neither process did less than 45% of the work.
        for attempt in range(1, CEILING_ATTEMPTS + 1):
            before = [_cpu_seconds(p.pid) for p in procs]
            result = _wrk(procs[0].pid, url, seconds, None)
            used = [_cpu_seconds(p.pid) - b for p, b in zip(procs, before, strict=True)]
            if min(used) >= 0.45 * sum(used) or attempt == CEILING_ATTEMPTS:
                break
        print(f"raw h11 {' '.join(extra)}: both processes busy after {attempt} attempt(s)")
        return result | {"cpu_ms": 1000 * sum(used) / max(1.0, result["rps"] * seconds)}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()


async def _load(url: str, org: Organisation) -> None:
    config = StorageConfig(database_type="postgres", database_url=url)
    async with open_storage(config) as storage:
        store = SqlFgaStore(storage.db)
        await store.write_model(StoredModel("01JBENCHFASTPATH0000000000", MODEL))
        for i in range(0, len(org.tuples), 20_000):
            await store.write_tuples(org.tuples[i : i + 20_000])
            # A table grown from empty in one go has no statistics: PostgreSQL then
            # plans the write's existence check as a scan of the whole store (584 s
            # for this load without it, 30 s with it). Autovacuum would, later.
            await storage.db.run(lambda conn: conn.exec_driver_sql("ANALYZE service_fga_tuples"))


def _drivers() -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple(d for d in GRPC_DRIVERS if "h2load" not in d[0] or shutil.which("h2load"))


def _grpc(
    target: str, method: str, body: Mapping[str, object], seconds: int, *options: str
) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "grpc_load.py"),
            target,
            method,
            json.dumps(body),
            f"--seconds={seconds}",
            f"--admin-secret={ADMIN_SECRET}",
            *options,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _spread(pid: int, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    """``measure()`` until neither worker of ``pid`` did less than :data:`EVEN_SHARE` of
    the work (at most :data:`SPREAD_ATTEMPTS` times); the share is printed."""
    attempt = 0
    while attempt < SPREAD_ATTEMPTS:
        attempt += 1
        workers = _workers_cpu(pid)
        result = measure()
        used = [t - workers.get(w, 0.0) for w, t in _workers_cpu(pid).items()]
        share = min(used) / max(sum(used), 1e-9)
        if share >= EVEN_SHARE:
            break
    print(f"  the less busy worker did {share:.0%} of the work ({attempt} attempt(s))")
    return result


def _workers_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each child process of ``pid`` (its ``--workers``)."""
    return {child: used for child, used in cpu_by_process(pid).items() if child != pid}


def _grpc_row(
    pid: int,
    metrics_url: str,
    target: str,
    method: str,
    body: Mapping[str, object],
    seconds: int,
    options: tuple[str, ...],
) -> dict[str, float]:
    """One gRPC measure: the driver's figures, the server's CPU per call, and the calls
    the server answered other than OK counted as failed."""
    full = f"/authorizer.v1.AuthorizerService/{method}"
    codes, before = _grpc_codes(metrics_url, full), _cpu_seconds(pid)
    result = _grpc(target, method, body, seconds, *options)
    used = _cpu_seconds(pid) - before
    after = _grpc_codes(metrics_url, full)
    # Cut short by the driver's end: the client's cancellations, not failures.
    refused = {
        code: after[code] - codes.get(code, 0.0)
        for code in after
        if code not in ("OK", "DEADLINE_EXCEEDED", "CANCELLED")
    }
    result["failed"] += sum(refused.values())
    result["cpu_ms"] = 1000 * used / max(1, result["ok"])
    return result


def _grpc_codes(metrics_url: str, method: str) -> dict[str, float]:
    """Calls of ``method`` by status code, all workers, from the server's metrics."""
    codes: dict[str, float] = {}
    for line in httpx.get(metrics_url, timeout=30).text.splitlines():
        if line.startswith("bastion_grpc_requests_total{") and f'method="{method}"' in line:
            code = line.partition('code="')[2].partition('"')[0]
            codes[code] = codes.get(code, 0.0) + float(line.rpartition(" ")[2])
    return codes


def grpc_floor(seconds: int) -> dict[str, dict[str, float]]:
    """Two ``bench/raw_grpc.py`` processes on one port, plain and ``--trio``, each driven
    by every gRPC driver; CPU per call of the two processes."""
    results: dict[str, dict[str, float]] = {}
    for extra in ((), ("--trio",)):
        port = free_port()
        procs = [
            subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "raw_grpc.py"), str(port), *extra]
            )
            for _ in range(2)
        ]
        try:
            time.sleep(2)  # both bound (grpcio binds before it serves)
            for label, options in _drivers():
                before = sum(_cpu_seconds(p.pid) for p in procs)
                got = _grpc(f"127.0.0.1:{port}", "Health", {}, seconds, *options)
                used = sum(_cpu_seconds(p.pid) for p in procs) - before
                got["cpu_ms"] = 1000 * used / max(1, got["ok"])
                name = "bare grpcio" + (" + hop into trio" if extra else "")
                results[f"{name}, {label}"] = got
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait()
    return results


def _profiled(pid: int, seconds: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    """py-spy recording ``pid`` and its workers for ``seconds`` into ``out`` (if given)."""
    if out is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = [shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")]
    return subprocess.Popen(
        [
            *spy,
            *("record", "--subprocesses", "--nonblocking", "--format", "raw", "--rate", "200"),
            *("--duration", str(seconds), "--pid", str(pid), "--output", str(out)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def bastion(
    seconds: int,
    tuples: int,
    tmp: Path,
    only: frozenset[str] = frozenset(MEASURES),
    profile: Path | None = None,
    cold: bool = False,
) -> dict[str, dict[str, float]]:
    org = generate(max(1_000, int(tuples / 3.3)), seed=7)
    url = fresh_postgres_url("bench-fast-path")
    started = time.perf_counter()
    trio.run(_load, url, org)
    print(f"loaded {len(org.tuples):,} tuples in {time.perf_counter() - started:.0f} s")
    kept = ("--log-level", "--rate-limit")
    flags = [
        *(f for f in base_flags("postgres", url) if not f.startswith(kept)),
        f"--memory-store-url={fresh_redis_url()}",
        "--log-level=error",
        "--rate-limit-rps=0",
        "--workers=2",
    ]
    results: dict[str, dict[str, float]] = {}
    with running(flags, tmp, name="fast-path") as server:
        origin = {"origin": server.url}
        admin = origin | {"x-service-admin-secret": ADMIN_SECRET}
        emails = [f"bench-{i}@example.com" for i in range(LOGIN_USERS)]
        with httpx.Client(base_url=server.url, timeout=600) as client:
            for email in emails:
                body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
                reply = client.post("/v1/signup", json=body, headers=origin)
                assert reply.status_code == 200, reply.text
            token = reply.json()["access_token"]
        if only & {"check", "check100"}:
            # The engine reads the store on demand: each worker reads every document once
            # (new connections reach both), as a server that has run a while has, before
            # the clock starts. ``--cold`` measures without it.
            started = time.perf_counter()
            for _ in range(0 if cold else 6):
                with httpx.Client(base_url=server.url, timeout=600, headers=admin) as one:
                    for start in range(0, org.documents, 100):
                        checks = [
                            {"relation": "viewer", "object": f"document:d{d}"}
                            for d in range(start, min(start + 100, org.documents))
                        ]
                        reply = one.post(
                            "/v1/check_permissions", json={"user": "u0", "checks": checks}
                        )
                        assert reply.status_code == 200, reply.text
            took = time.perf_counter() - started
            print(f"warm-up: every document read by each worker in {took:.0f} s")
        validate: dict[str, object] = {"token_type": "access_token", "token": token}
        scripts = {
            "validate": POST_SCRIPT
            % {"body": json.dumps(validate), "origin": server.url, "secret": ADMIN_SECRET},
            "login": LOGIN_SCRIPT
            % {
                "users": ",".join(f'"{e}"' for e in emails),
                "origin": server.url,
                "password": PASSWORD,
            },
        }
        for per in (1, 100):
            scripts[f"check{per}"] = WRK_SCRIPT % {
                "users": org.users,
                "docs": org.documents,
                "per": per,
                "seed": 7,
                "origin": server.url,
                "secret": ADMIN_SECRET,
            }
        scripts["check_same"] = POST_SCRIPT % {
            "body": json.dumps(SAME_CHECK),
            "origin": server.url,
            "secret": ADMIN_SECRET,
        }
        paths = {}
        for name, text in scripts.items():
            paths[name] = tmp / f"{name}.lua"
            paths[name].write_text(text)
        pid = server.process.pid
        runs = {
            "jwks": ("/.well-known/jwks.json", None),
            "validate": ("/v1/validate_jwt_token", paths["validate"]),
            "check": ("/v1/check_permissions", paths["check1"]),
            "check100": ("/v1/check_permissions", paths["check100"]),
            "login": ("/v1/login", paths["login"]),
            "check_same": ("/v1/check_permissions", paths["check_same"]),
        }
        for name, (path, script) in runs.items():
            if name in only or (name == "check_same" and "grpc" in only):
                out = None if profile is None else profile / f"{name}.txt"
                spy = _profiled(pid, seconds, out)
                print(name)
                results[name] = _spread(pid, partial(_wrk, pid, server.url + path, seconds, script))
                if spy is not None and out is not None:
                    spy.wait()
                    print(report(out), end="\n\n")
        if "grpc" not in only:
            return results
        target = f"127.0.0.1:{server.grpc_port}"
        metrics_url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        for name, method, payload in (
            ("grpc validate", "ValidateJwtToken", validate),
            ("grpc check", "CheckPermissions", SAME_CHECK),
        ):
            for label, options in _drivers():
                key = f"{name} ({label})"
                out = None
                if profile is not None:
                    out = profile / f"{name.replace(' ', '_')}_{options[0][9:]}.txt"
                spy = _profiled(pid, seconds, out)
                row = partial(
                    _grpc_row, pid, metrics_url, target, method, payload, seconds, options
                )
                print(key)
                # One connection is served by one worker: nothing to even out.
                one = "--channels=1" in options or spy is not None
                results[key] = row() if one else _spread(pid, row)
                if spy is not None and out is not None:
                    spy.wait()
                    print(report(out), end="\n\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument(
        "--profile",
        type=Path,
        help="record py-spy stacks of the workers into this folder during each measure"
        " and print where the time went (the figures then carry py-spy's own cost)",
    )
    parser.add_argument("--only", default=",".join(MEASURES), help=f"some of {','.join(MEASURES)}")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="measure the checks without reading every document first (each worker's "
        "engine cache starts empty)",
    )
    args = parser.parse_args()
    only = frozenset(args.only.split(","))
    if unknown := only - set(MEASURES):
        sys.exit(f"--only: unknown {sorted(unknown)}")
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    load = os.getloadavg()[0]
    raw = (
        ceiling(args.seconds)
        if "ceiling" in only
        else {"rps": float("nan"), "cpu_ms": 0.0, "p99_ms": 0.0}
    )
    # The same two processes, each request also reading one key from Redis: the floor of
    # any token validation that checks a session kept in Redis.
    floor = ceiling(args.seconds, "--redis", "127.0.0.1:6379") if "floor" in only else None
    with tempfile.TemporaryDirectory() as tmp:
        got = bastion(args.seconds, args.tuples, Path(tmp), only, args.profile, args.cold)
    if "grpcfloor" in only:
        got |= grpc_floor(args.seconds)
    verify = raw_verify_rate(args.seconds) if "login" in only else float("nan")
    top = raw["rps"]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at the start;")
    print(f"wrk -t1 -c16, {args.seconds} s per figure, same machine; PostgreSQL + Redis")
    print("| measure | req/s | server CPU ms/req | p99 ms | vs ceiling | target |")
    print("|---|---|---|---|---|---|")
    print(
        f"| ceiling: 2 raw h11 processes | {top:,.0f} | {raw['cpu_ms']:.3f} | "
        f"{raw['p99_ms']:.1f} | 1.00 | |"
    )
    if floor is not None:
        print(
            f"| the same + one Redis GET a request (a validation's floor) | {floor['rps']:,.0f}"
            f" | {floor['cpu_ms']:.3f} | {floor['p99_ms']:.1f} | {floor['rps'] / top:.2f} | |"
        )
    rows = [
        ("jwks", "jwks, --workers 2", ">= 0.60 x"),
        ("validate", "validate_jwt_token", f">= 0.43 x (1.5 x {AUTHORIZER['validate']:,})"),
        ("check", "check_permissions, 1 check", f">= 0.39 x (1.5 x {AUTHORIZER['check']:,})"),
        ("check_same", "check_permissions, 1 check, the gRPC rows' body (u1, document:d1)", ""),
    ]
    for key, label, target in rows:
        if key not in got:
            continue
        r = got[key]
        print(
            f"| {label} | {r['rps']:,.0f} | {r['cpu_ms']:.3f} | {r['p99_ms']:.1f} | "
            f"{r['rps'] / top:.2f} | {target} |"
        )
    batch = got.get("check100")
    if batch is not None:
        print(
            f"| check_permissions, 100 checks | {batch['rps']:,.0f} ({batch['rps'] * 100:,.0f}"
            f" checks/s) | {batch['cpu_ms']:.3f} | {batch['p99_ms']:.1f} | | >= 75,000 checks/s |"
        )
    login = got.get("login")
    if login is not None:
        print(
            f"| login (raw argon2id verify {verify:.1f}/s) | {login['rps']:.1f} | "
            f"{login['cpu_ms']:.1f} | {login['p99_ms']:.0f} | {login['rps'] / verify:.2f} x raw"
            " | >= 0.90 x raw, p99 < 300 ms |"
        )
    for key, r in got.items():
        if not key.startswith(("grpc ", "bare grpcio")):
            continue
        yardstick = {"grpc validate": "validate", "grpc check": "check_same"}
        http = got.get(yardstick.get(key.partition(" (")[0], ""), None)
        versus = ""
        if http is not None:
            versus = (
                f"{r['rps'] / http['rps']:.2f} x HTTP, CPU {r['cpu_ms'] / http['cpu_ms']:.2f} x"
            )
        target = ">= 0.8 x HTTP, CPU <= 1.3 x" if key.startswith("grpc ") else ""
        latency = f"{r['p99_ms']:.1f}" if "p99_ms" in r else f"mean {r['mean_ms']:.1f}"
        print(f"| {key} | {r['rps']:,.0f} | {r['cpu_ms']:.3f} | {latency} | {versus} | {target} |")
    errors = {k: int(v.get("errors", v.get("failed", 0))) for k, v in got.items()}
    print(f"non-2xx / failed calls: {errors}")


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
