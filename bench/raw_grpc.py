"""grpcio's floor: a bare grpcio server whose ``grpc.health.v1.Health/Check`` answers
SERVING and does nothing else, shaped as bastion's listener was before it moved onto
``h2`` in the trio loop (a thread pool of 32, ``maximum_concurrent_rpcs`` 32,
``SO_REUSEPORT``, so several processes can share a port). ``--trio`` makes each call hop
into a trio loop and back, as bastion's bridge from grpcio's threads did.

What a call costs grpcio itself on this machine, and how fast a client drives it:
``bench/fast_path.py`` starts two and loads them with ``bench/grpc_load.py``. Run alone:
``.venv/bin/python bench/raw_grpc.py PORT [--trio]``.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import trio
from grpc_health.v1 import health_pb2

#: As bastion's grpcio listener was.
THREADS = 32
SERVING = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


def serve(port: int, token: trio.lowlevel.TrioToken | None) -> None:
    async def nothing() -> None:
        return None

    def check(request: Any, context: grpc.ServicerContext) -> Any:
        if token is not None:
            trio.from_thread.run(nothing, trio_token=token)
        return SERVING

    handler = grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {
            "Check": grpc.unary_unary_rpc_method_handler(
                check,
                request_deserializer=health_pb2.HealthCheckRequest.FromString,
                response_serializer=health_pb2.HealthCheckResponse.SerializeToString,
            )
        },
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=THREADS),
        handlers=[handler],
        options=[("grpc.so_reuseport", 1)],
        maximum_concurrent_rpcs=THREADS,
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


async def with_trio(port: int) -> None:
    token = trio.lowlevel.current_trio_token()
    await trio.to_thread.run_sync(serve, port, token, abandon_on_cancel=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--trio", action="store_true")
    args = parser.parse_args()
    if args.trio:
        trio.run(with_trio, args.port)
    else:
        serve(args.port, None)


if __name__ == "__main__":
    main()
