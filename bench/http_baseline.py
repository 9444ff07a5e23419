"""HTTP ceiling: requests/s and latency of the cheapest endpoints, at 32 connections.

Starts a bastion server on SQLite (SQL-backed memory store) in its own process, drives it
with wrk (Debian package `wrk`) in another, and prints requests/s, p50 and p99 for:

- ``GET /healthz`` (exempt from rate limiting; one storage ping per request);
- ``POST /graphql`` with ``{ meta { version client_id } }``: a small JSON POST through the
  whole edge (CSRF, per-IP token bucket in the memory store, JSON body) and the GraphQL
  executor, reading nothing from storage.

The client's CPU share (wrk's user+system time over wall time, of the machine's cores)
is printed beside each figure so a reader can tell when the client, not the server, is
the limit. Run: ``.venv/bin/python bench/http_baseline.py [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server.harness import base_flags, running  # noqa: E402

POST_SCRIPT = """
wrk.method = "POST"
wrk.body = '{"query": "{ meta { version client_id } }"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
"""


def _wrk(url: str, seconds: int, script: Path | None) -> dict[str, float]:
    args = ["wrk", "-t2", "-c32", f"-d{seconds}s", "--latency", url]
    if script is not None:
        args[1:1] = ["-s", str(script)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def latency(label: str) -> float:
        m = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert m, out
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": rps,
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "errors": float(non2xx.group(1)) if non2xx else 0.0,
        "client_cpu_share": cpu / wall / (os.cpu_count() or 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument(
        "--memory-store-url",
        default="",
        help="where the per-IP rate limit lives (default: the SQLite database; memory://)",
    )
    parser.add_argument(
        "--no-rate-limit", action="store_true", help="--rate-limit-rps=0: the bare HTTP path"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        flags = base_flags("sqlite", str(tmp_path / "bench.db"))
        flags = [f for f in flags if not f.startswith("--log-level")] + ["--log-level=error"]
        if args.no_rate_limit:
            flags = [f for f in flags if not f.startswith("--rate-limit")] + ["--rate-limit-rps=0"]
        if args.memory_store_url:
            flags.append(f"--memory-store-url={args.memory_store_url}")
        with running(flags, tmp_path) as server:
            httpx.get(server.url + "/healthz")
            script = tmp_path / "post.lua"
            script.write_text(POST_SCRIPT % {"origin": server.url})
            results = {
                "GET /healthz": _wrk(server.url + "/healthz", args.seconds, None),
                "POST /graphql meta (small JSON POST)": _wrk(
                    server.url + "/graphql", args.seconds, script
                ),
            }
    limit = "off" if args.no_rate_limit else f"on, in {args.memory_store_url or 'the SQLite db'}"
    print(
        f"machine: {os.cpu_count()} cores, {sys.platform}; 32 connections, wrk -t2, "
        f"{args.seconds}s; rate limit {limit}"
    )
    for name, r in results.items():
        print(
            f"{name:42s} {r['rps']:8.0f} req/s  p50 {r['p50_ms']:6.2f} ms"
            f"  p99 {r['p99_ms']:6.2f} ms  non-2xx {int(r['errors'])}"
            f"  client CPU {r['client_cpu_share']:.0%}"
        )


if __name__ == "__main__":
    main()
