"""A gRPC load generator for ``bench/fast_path.py``: ``--concurrency`` callers repeat one
unary call for ``--seconds`` and print how many succeeded, how many failed, the rate and
the latency in milliseconds, as one JSON line.

Two drivers:

- ``--driver python`` (the default): grpc.aio callers spread over ``--channels``
  channels, each its own HTTP/2 connection (with ``--workers``, ``SO_REUSEPORT`` gives
  each connection to one worker: one channel loads one worker only). Prints ``ok``,
  ``failed``, ``rps``, ``p50_ms``, ``p99_ms``.
- ``--driver h2load``: nghttp2's ``h2load`` (C; ``apt-get install nghttp2-client``) sends
  the same call as a gRPC POST: the 5-byte length-prefixed message from a file,
  ``content-type: application/grpc``, ``te: trailers``; ``--channels`` connections with
  ``--concurrency / --channels`` streams each, one client thread. h2load counts an HTTP
  200 as a success whatever the ``grpc-status`` trailer says, so the caller must count
  gRPC status codes elsewhere (``bench/fast_path.py`` reads the server's metrics). Prints
  ``ok`` (HTTP 2xx), ``failed``, ``rps``, ``mean_ms`` (h2load reports no percentiles).

Run (what ``bench/fast_path.py`` does):
``.venv/bin/python bench/grpc_load.py HOST:PORT METHOD JSON_BODY [--seconds 10]
[--concurrency 16] [--channels 1] [--driver python|h2load] [--admin-secret S]``, METHOD
one of ``ValidateJwtToken``, ``CheckPermissions`` (``authorizer.v1.AuthorizerService``)
or ``Health`` (``grpc.health.v1.Health/Check``, the cheapest call bastion serves: it
reads no user data, but proves storage is ready).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2  # noqa: E402

_SERVICE = "/authorizer.v1.AuthorizerService/"
#: METHOD -> (the call's path, its request message, its response message).
METHODS: dict[str, tuple[str, type[Message], type[Message]]] = {
    "Health": (
        "/grpc.health.v1.Health/Check",
        health_pb2.HealthCheckRequest,
        health_pb2.HealthCheckResponse,
    ),
    "ValidateJwtToken": (
        _SERVICE + "ValidateJwtToken",
        authorizer_pb2.ValidateJwtTokenRequest,
        authorizer_pb2.ValidateJwtTokenResponse,
    ),
    "CheckPermissions": (
        _SERVICE + "CheckPermissions",
        authorizer_pb2.CheckPermissionsRequest,
        authorizer_pb2.CheckPermissionsResponse,
    ),
}


async def run_python(args: argparse.Namespace, request: Message) -> dict[str, float]:
    path, _, response = METHODS[args.method]
    metadata = (("x-service-admin-secret", args.admin_secret),) if args.admin_secret else ()
    latencies: list[float] = []
    failed = 0
    # A channel of its own subchannel pool opens its own connection.
    channels = [
        grpc.aio.insecure_channel(args.target, options=[("grpc.use_local_subchannel_pool", 1)])
        for _ in range(args.channels)
    ]
    calls = [
        channel.unary_unary(
            path,
            request_serializer=type(request).SerializeToString,
            response_deserializer=response.FromString,
        )
        for channel in channels
    ]
    try:
        for call in calls:
            await call(request, metadata=metadata)  # warm each channel; fail loudly if wrong
        deadline = time.monotonic() + args.seconds

        async def caller(call: grpc.aio.UnaryUnaryMultiCallable) -> None:
            nonlocal failed
            while (now := time.monotonic()) < deadline:
                try:
                    await call(request, metadata=metadata)
                except grpc.aio.AioRpcError:
                    failed += 1
                    continue
                latencies.append(time.monotonic() - now)

        started = time.monotonic()
        await asyncio.gather(*(caller(calls[i % len(calls)]) for i in range(args.concurrency)))
        elapsed = time.monotonic() - started
    finally:
        for channel in channels:
            await channel.close()
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "ok": len(latencies),
        "failed": failed,
        "rps": len(latencies) / elapsed,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
    }


def run_h2load(args: argparse.Namespace, request: Message) -> dict[str, float]:
    path, _, _ = METHODS[args.method]
    payload = request.SerializeToString()
    headers = ["content-type: application/grpc", "te: trailers"]
    if args.admin_secret:
        headers.append(f"x-service-admin-secret: {args.admin_secret}")
    with tempfile.NamedTemporaryFile(suffix=".grpc") as body:
        body.write(b"\0" + struct.pack(">I", len(payload)) + payload)
        body.flush()
        out = subprocess.run(
            [
                *("h2load", "-D", str(round(args.seconds)), "-t", "1", "-d", body.name),
                *("-c", str(args.channels), "-m", str(max(1, args.concurrency // args.channels))),
                *(arg for header in headers for arg in ("-H", header)),
                f"http://{args.target}{path}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finished = re.search(r"finished in ([\d.]+)s", out)
    counts = re.search(r"requests: \d+ total, .* (\d+) succeeded, (\d+) failed", out)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)", out)
    assert finished, out
    assert counts, out
    assert mean, out
    ok, failed = int(counts.group(1)), int(counts.group(2))
    value, unit = float(mean.group(1)), mean.group(2)
    return {
        "ok": ok,
        "failed": failed,
        "rps": ok / float(finished.group(1)),
        "mean_ms": value / 1000 if unit == "us" else value * 1000 if unit == "s" else value,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("method", choices=sorted(METHODS))
    parser.add_argument("body")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--driver", choices=("python", "h2load"), default="python")
    parser.add_argument("--admin-secret", default="")
    args = parser.parse_args()
    request = json_format.ParseDict(json.loads(args.body), METHODS[args.method][1]())
    if args.driver == "h2load":
        print(json.dumps(run_h2load(args, request)))
    else:
        print(json.dumps(asyncio.run(run_python(args, request))))


if __name__ == "__main__":
    main()
