"""The two HTTP servers side by side (``--http-server h11`` and ``hypercorn``), same run.

For each server: one bastion process on PostgreSQL with Redis as the memory store, one
user signed up, an authorization model with one tuple; then wrk (``-t1 -c16``, the shape
of the fast-path issue's table) on the same machine against:

- ``GET /.well-known/jwks.json``: no storage, the HTTP stack and the application;
- ``POST /v1/validate_jwt_token`` with the user's access token (signature, claims, one
  Redis read, the user's SQL-side status through its cache);
- ``POST /v1/check_permissions`` with one check (the admin header names the user).

The server's CPU seconds per request (from /proc) are printed beside the throughput, so
the figure does not depend on how much CPU wrk took. Run:
``.venv/bin/python bench/http_servers.py [--seconds 8] [--servers h11,hypercorn,h11:2]``
(``h11:2``: the h11 server with ``--workers 2``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import ADMIN_SECRET, base_flags, running  # noqa: E402

MODEL = """model
  schema 1.1

type user

type document
  relations
    define viewer: [user]
"""

POST_SCRIPT = """
wrk.method = "POST"
wrk.body = '%(body)s'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
wrk.headers["x-service-admin-secret"] = "%(secret)s"
"""


def cpu_by_process(pid: int) -> dict[int, float]:
    """CPU seconds so far of ``pid`` and of each of its child processes (the
    ``--workers``), by pid."""
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def _cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its child processes (the ``--workers``)."""
    return sum(cpu_by_process(pid).values())


def _wrk(
    pid: int, url: str, seconds: int, script: Path | None, connections: int = 16
) -> dict[str, float]:
    args = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url]
    if script is not None:
        args[1:1] = ["-s", str(script)]
    before = _cpu_seconds(pid)
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    used = _cpu_seconds(pid) - before
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    assert p99, out
    value, unit = float(p99.group(1)), p99.group(2)
    p99_ms = value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    return {
        "rps": rps,
        "p99_ms": p99_ms,
        "errors": float(bad.group(1)) if bad else 0.0,
        "cpu_ms": 1000 * used / max(1, requests),
    }


JWKS = "GET /.well-known/jwks.json"
VALIDATE = "POST /v1/validate_jwt_token"
CHECK = "POST /v1/check_permissions (1 check)"


def server_flags(spec: str, memory_store_url: str | None = None) -> list[str]:
    """The benchmarked server's flags: a fresh PostgreSQL database, Redis as the memory
    store, no rate limit, errors-only logging; ``spec`` as for :func:`measure`."""
    server_kind, _, workers = spec.partition(":")
    kept = ("--log-level", "--rate-limit")
    return [
        *(
            f
            for f in base_flags("postgres", fresh_postgres_url("bench-http"))
            if not f.startswith(kept)
        ),
        f"--memory-store-url={memory_store_url or fresh_redis_url()}",
        "--log-level=error",
        "--rate-limit-rps=0",
        f"--http-server={server_kind}",
        f"--workers={workers or 1}",
    ]


def measure(
    spec: str,
    seconds: int,
    tmp: Path,
    *,
    memory_store_url: str | None = None,
    endpoints: tuple[str, ...] = (JWKS, VALIDATE, CHECK),
) -> dict[str, dict[str, float]]:
    """``spec``: ``h11``, ``hypercorn`` or ``h11:N`` (N ``--workers``); the memory store is
    a fresh Redis database unless ``memory_store_url`` names one (Sentinel, Cluster)."""
    flags = server_flags(spec, memory_store_url)
    with running(flags, tmp, name=spec.replace(":", "x")) as server:
        admin = {"origin": server.url, "x-service-admin-secret": ADMIN_SECRET}
        with httpx.Client(base_url=server.url, headers=admin, timeout=30) as client:
            signup = client.post(
                "/v1/signup",
                json={"email": "bench@example.com", "password": "Bench!pass1",
                      "confirm_password": "Bench!pass1"},
            )  # fmt: skip
            assert signup.status_code == 200, signup.text
            token = signup.json()["access_token"]
            assert client.post("/v1/admin/fga/model", json={"dsl": MODEL}).status_code == 200
            tuples = [{"user": "user:ann", "relation": "viewer", "object": "document:1"}]
            assert client.post("/v1/admin/fga/tuples", json={"tuples": tuples}).status_code == 200
        scripts = {}
        for name, body in {
            "validate": {"token_type": "access_token", "token": token},
            "check": {
                "user": "user:ann",
                "checks": [{"relation": "viewer", "object": "document:1"}],
            },
        }.items():
            path = tmp / f"{spec.replace(':', 'x')}-{name}.lua"
            path.write_text(
                POST_SCRIPT
                % {"body": json.dumps(body), "origin": server.url, "secret": ADMIN_SECRET}
            )
            scripts[name] = path
        pid = server.process.pid
        targets = {
            JWKS: ("/.well-known/jwks.json", None),
            VALIDATE: ("/v1/validate_jwt_token", scripts["validate"]),
            CHECK: ("/v1/check_permissions", scripts["check"]),
        }
        return {
            name: _wrk(pid, server.url + targets[name][0], seconds, targets[name][1])
            for name in endpoints
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument(
        "--servers", default="h11,hypercorn,h11:2", help="h11, hypercorn, h11:N (N --workers)"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.servers.split(","):
            results[kind] = measure(kind, args.seconds, Path(tmp))
    print(f"machine: {os.cpu_count()} cores; wrk -t1 -c16, {args.seconds}s; PostgreSQL + Redis")
    for kind, rows in results.items():
        for name, r in rows.items():
            print(
                f"{kind:11s} {name:38s} {r['rps']:7.0f} req/s  p99 {r['p99_ms']:6.2f} ms"
                f"  server CPU {r['cpu_ms']:.3f} ms/req  non-2xx {int(r['errors'])}"
            )


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
