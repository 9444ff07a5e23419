"""CPU cost of one authorization check through the service layer, without HTTP.

Wall-clock rates lie on a shared machine; CPU time per check does not (much). This runs
``FgaService.check_permissions`` (request parsing, the revision probe, the engine, the
cache, metrics, the reply) in-process over ``bench/fga.py``'s generated organisation on a
memory store, in requests of 1 and of 100 checks drawn uniformly from (user, document)
pairs, warm (after a pass that fills the cache with other draws), and prints the CPU
microseconds per check and per request (``time.process_time``).

Run: ``.venv/bin/python bench/fga_cpu.py [--documents 30000] [--checks 20000] [--profile]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.service.context import CallerContext, Protocol  # noqa: E402
from bastion.service.fga.service import FgaService  # noqa: E402
from bastion.service.metrics import Metrics  # noqa: E402
from bastion.service.requests import bind  # noqa: E402
from bastion.storage.fga import MemoryFgaStore, StoredModel  # noqa: E402
from bench.fga import MODEL, Organisation, generate  # noqa: E402


class _AdminService:
    """The slice of the Service that check_permissions asks: every caller is an admin."""

    storage: Any = None

    async def is_admin(self, caller: CallerContext) -> bool:
        return True

    async def require_admin(self, caller: CallerContext) -> None:
        return None


async def _service(org: Organisation) -> FgaService:
    store = MemoryFgaStore()
    await store.write_model(StoredModel("bench", MODEL))
    await store.write_tuples(org.tuples)
    fga = FgaService(_AdminService(), store, Metrics())
    await fga.warm_up()
    return fga


def _requests(
    org: Organisation, rng: random.Random, checks: int, per_request: int
) -> list[dict[str, Any]]:
    return [
        {
            "user": f"u{rng.randrange(org.users)}",
            "checks": [
                {"relation": "viewer", "object": f"document:d{rng.randrange(org.documents)}"}
                for _ in range(per_request)
            ],
        }
        for _ in range(checks // per_request)
    ]


async def _run(fga: FgaService, requests: list[dict[str, Any]]) -> float:
    caller = CallerContext(protocol=Protocol.REST, client_ip="127.0.0.1")
    check = bind(fga.check_permissions)  # as the transports call it: from the wire form
    started = time.process_time()
    for request in requests:
        await check(request, caller)
    return time.process_time() - started


async def measure(documents: int, checks: int, seed: int, profile: bool) -> None:
    org = generate(documents, seed)
    fga = await _service(org)
    rng = random.Random(seed)
    print(f"organisation: {len(org.tuples):,} tuples; {checks:,} checks per row; CPU time")
    for per_request in (100, 1):
        await _run(fga, _requests(org, rng, checks, per_request))  # warm-up: other draws
        requests = _requests(org, rng, checks, per_request)
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        spent = await _run(fga, requests)
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        print(
            f"{per_request:>3} checks/request: {spent / checks * 1e6:7.1f} µs CPU per check, "
            f"{spent / len(requests) * 1e6:8.1f} µs per request "
            f"(= {checks / spent:,.0f} checks/s per core)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=30_000)
    parser.add_argument("--checks", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    trio.run(measure, args.documents, args.checks, args.seed, args.profile)


if __name__ == "__main__":
    main()
