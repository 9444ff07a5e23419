"""A gRPC load generator for ``bench/fast_path.py``: ``--concurrency`` callers on one
grpc.aio channel repeat one unary call for ``--seconds`` and print how many succeeded,
how many failed, and the p50/p99 latency in milliseconds, as one JSON line.

Run (what ``bench/fast_path.py`` does):
``.venv/bin/python bench/grpc_load.py HOST:PORT METHOD JSON_BODY [--seconds 10]
[--concurrency 16] [--admin-secret S]``, METHOD one of ``ValidateJwtToken``,
``CheckPermissions`` (``AuthorizerService``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import grpc
from google.protobuf import json_format

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.transports.grpc.proto.authorizer.v1 import (  # noqa: E402
    authorizer_pb2,
    authorizer_pb2_grpc,
)

REQUESTS = {
    "ValidateJwtToken": authorizer_pb2.ValidateJwtTokenRequest,
    "CheckPermissions": authorizer_pb2.CheckPermissionsRequest,
}


async def run(args: argparse.Namespace) -> dict[str, float]:
    request = json_format.ParseDict(json.loads(args.body), REQUESTS[args.method]())
    metadata = (("x-service-admin-secret", args.admin_secret),) if args.admin_secret else ()
    latencies: list[float] = []
    failed = 0
    async with grpc.aio.insecure_channel(args.target) as channel:
        call = getattr(authorizer_pb2_grpc.AuthorizerServiceStub(channel), args.method)
        await call(request, metadata=metadata)  # warm the channel; fail loudly if wrong
        deadline = time.monotonic() + args.seconds

        async def caller() -> None:
            nonlocal failed
            while (now := time.monotonic()) < deadline:
                try:
                    await call(request, metadata=metadata)
                except grpc.aio.AioRpcError:
                    failed += 1
                    continue
                latencies.append(time.monotonic() - now)

        started = time.monotonic()
        await asyncio.gather(*(caller() for _ in range(args.concurrency)))
        elapsed = time.monotonic() - started
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "ok": len(latencies),
        "failed": failed,
        "rps": len(latencies) / elapsed,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("method", choices=sorted(REQUESTS))
    parser.add_argument("body")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--admin-secret", default="")
    print(json.dumps(asyncio.run(run(parser.parse_args()))))


if __name__ == "__main__":
    main()
