"""How throughput scales with bastion processes: validate_jwt_token and check_permissions
req/s with ``--workers`` 1, 2 and 3, on PostgreSQL, with the memory store on a single
Redis, a Sentinel-watched master (one replica, three sentinels) or a three-master Redis
Cluster, the topologies started here as ``tests/redis_topologies.py`` starts them.

The load and the figures are :mod:`bench.http_servers`' (wrk ``-t1 -c16`` on the same
machine; the server's CPU per request from /proc, its workers included). Run:
``.venv/bin/python bench/scale.py [--seconds 5] [--workers 1,2,3] [--memory redis,sentinel]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.http_servers import CHECK, VALIDATE, measure  # noqa: E402
from tests.dbfixtures import fresh_redis_url  # noqa: E402
from tests.redis_topologies import redis_cluster, sentinel_set  # noqa: E402

MEMORY_STORES = ("redis", "sentinel", "cluster")


@contextlib.contextmanager
def memory_store(kind: str, directory: Path) -> Iterator[str]:
    """The ``--memory-store-url`` of a topology that lives as long as the block."""
    if kind == "redis":
        yield fresh_redis_url()
    elif kind == "sentinel":
        with sentinel_set(directory) as sentinels:
            yield sentinels.url()
    else:
        with redis_cluster(directory) as cluster:
            yield cluster.url()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--workers", default="1,2,3", help="process counts, comma-separated")
    parser.add_argument("--memory", default="redis", help=", ".join(MEMORY_STORES))
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    counts = [int(n) for n in args.workers.split(",")]
    kinds = args.memory.split(",")
    if not set(kinds) <= set(MEMORY_STORES):
        sys.exit(f"--memory: one or more of {', '.join(MEMORY_STORES)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            with memory_store(kind, Path(tmp) / kind) as url:
                for count in counts:
                    found = measure(
                        f"h11:{count}",
                        args.seconds,
                        Path(tmp),
                        memory_store_url=url,
                        endpoints=(VALIDATE, CHECK),
                    )
                    rows.append((kind, count, found[VALIDATE], found[CHECK]))
    load = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} cores, load average {load:.1f} at the end; "
        f"wrk -t1 -c16 on the same cores, {args.seconds}s per figure; PostgreSQL"
    )
    print("memory store | processes | validate_jwt_token req/s (CPU ms/req) | "
          "check_permissions req/s (CPU ms/req) | non-2xx")  # fmt: skip
    for kind, count, validate, check in rows:
        print(
            f"{kind:8s} | {count} | {validate['rps']:6.0f} ({validate['cpu_ms']:.2f}) | "
            f"{check['rps']:6.0f} ({check['cpu_ms']:.2f}) | "
            f"{int(validate['errors'] + check['errors'])}"
        )


if __name__ == "__main__":
    main()
