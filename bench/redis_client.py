"""The memory store's Redis calls: redis-py's sync client in worker threads (how every
call went before issue 18, and how a Cluster still goes) against bastion's trio client
(``storage/memory/resp.py``), through the same ``RedisMemoryStore``.

For GET, SET with a TTL (``SET ... PX``) and the token-bucket script (the rate-limit
lease), at 1 and at 16 concurrent callers, each client's pool as large as the callers:
operations per second, and this process's CPU per operation (``time.process_time``,
worker threads included; the Redis server's own CPU is not counted, and is the same for
both). Keys live under one random prefix and are deleted at the end.

Run: ``.venv/bin/python bench/redis_client.py [--url redis://127.0.0.1:6379/0]
[--seconds 3] [--concurrency 1,16]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import redis
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.storage.memory import RedisMemoryStore  # noqa: E402
from bastion.storage.memory.redis_threads import ThreadedRedis, retry  # noqa: E402

Operation = Callable[[RedisMemoryStore, str, int], Awaitable[object]]


async def _get(store: RedisMemoryStore, prefix: str, n: int) -> object:
    return await store.get(f"{prefix}get")


async def _set(store: RedisMemoryStore, prefix: str, n: int) -> object:
    await store.set(f"{prefix}set:{n % 1000}", b"x" * 64, ttl=60)
    return None


async def _bucket(store: RedisMemoryStore, prefix: str, n: int) -> object:
    return await store.token_bucket(f"{prefix}bucket:{n % 100}", 1e6, 1000)


OPERATIONS: dict[str, Operation] = {"GET": _get, "SET PX": _set, "token bucket": _bucket}


def _stores(url: str, pool: int) -> dict[str, RedisMemoryStore]:
    threaded = redis.Redis.from_url(
        url, max_connections=pool, socket_timeout=10, socket_connect_timeout=10, retry=retry()
    )
    return {
        "sync redis-py in threads": RedisMemoryStore(
            url, timeout=10, client=ThreadedRedis(lambda: threaded, pool_size=pool)
        ),
        "trio client": RedisMemoryStore(url, pool_size=pool, timeout=10),
    }


async def _run(
    store: RedisMemoryStore, operation: Operation, prefix: str, callers: int, seconds: float
) -> tuple[int, float, float]:
    """(operations, wall seconds, CPU seconds) for ``callers`` loops over ``seconds``."""
    done = 0
    deadline = trio.current_time() + seconds

    async def caller() -> None:
        nonlocal done
        n = 0
        while trio.current_time() < deadline:
            await operation(store, prefix, n)
            n += 1
        done += n

    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(callers):
            nursery.start_soon(caller)
    return done, time.perf_counter() - wall, time.process_time() - cpu


async def main(url: str, seconds: float, concurrency: list[int]) -> None:
    prefix = f"bench:redis_client:{uuid.uuid4().hex[:8]}:"
    rows = []
    for callers in concurrency:
        stores = _stores(url, pool=max(callers, 1))
        try:
            for name, operation in OPERATIONS.items():
                for client, store in stores.items():
                    await store.set(f"{prefix}get", b"v" * 64, ttl=600)
                    await _run(store, operation, prefix, callers, min(0.5, seconds))  # warm
                    ops, wall, cpu = await _run(store, operation, prefix, callers, seconds)
                    rows.append((name, callers, client, ops / wall, cpu / ops * 1e6))
                    print(f"{rows[-1][0]:<13} c={callers:<3} {client:<25} {ops / wall:>9,.0f}"
                          f" ops/s {cpu / ops * 1e6:>7.1f} us CPU/op", flush=True)  # fmt: skip
        finally:
            await next(iter(stores.values())).delete_prefix(prefix)
            for store in stores.values():
                await store.aclose()
    print("\n| operation | callers | client | ops/s | CPU per op |")
    print("|---|---|---|---|---|")
    for name, callers, client, rate, cpu_us in rows:
        print(f"| {name} | {callers} | {client} | {rate:,.0f} | {cpu_us:.0f} us |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", default="1,16")
    args = parser.parse_args()
    trio.run(main, args.url, args.seconds, [int(c) for c in args.concurrency.split(",")])
