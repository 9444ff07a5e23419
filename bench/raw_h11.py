"""The ceiling the fast-path issue measures against: a bare trio + h11 loop answering every
request with one small JSON document, nothing else (no routing, no limits, no timeouts).

Each process binds its own socket to the port with ``SO_REUSEPORT``, so several processes
share it and the kernel spreads connections between them. Run (what ``bench/fast_path.py``
does): ``.venv/bin/python bench/raw_h11.py PORT`` once per process.

``--redis HOST:PORT``: each request also reads one key from Redis through bastion's own
trio Redis client before it answers: the floor of a token validation (the HTTP exchange
and the one memory-store read it cannot skip), with nothing of bastion's around it.

``--parser httptools``: the same loop with llhttp's C parser (``httptools``, uvicorn's)
in place of h11, the answer's bytes written by hand: how much of a request's CPU is h11's
(``bench/http_parsers.py`` runs both side by side).
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import h11
import httptools
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bastion.storage.memory.resp import ConnectOptions, Pool

BODY = b'{"ok":true}'
HEADERS = [("content-type", "application/json"), ("content-length", str(len(BODY)))]


async def _serve(stream: trio.SocketStream, redis: Pool | None) -> None:
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                continue
            if isinstance(event, h11.EndOfMessage):
                if redis is not None:
                    await redis.request([["GET", "bench:session"]])
                out = conn.send(h11.Response(status_code=200, headers=HEADERS))
                out += conn.send(h11.Data(data=BODY)) + conn.send(h11.EndOfMessage())
                await stream.send_all(out)
                conn.start_next_cycle()
                continue
            return  # ConnectionClosed or anything unexpected
    except (trio.BrokenResourceError, h11.ProtocolError):
        pass
    finally:
        await stream.aclose()


async def _serve_httptools(stream: trio.SocketStream, redis: Pool | None) -> None:
    done: list[bool] = []

    class Requests:
        def on_message_complete(self) -> None:
            done.append(True)

    parser = httptools.HttpRequestParser(Requests())
    answer = b"HTTP/1.1 200 OK\r\n" + b"".join(
        f"{name}: {value}\r\n".encode() for name, value in HEADERS
    )
    answer += b"\r\n" + BODY
    try:
        while data := await stream.receive_some(65536):
            parser.feed_data(data)
            for _ in done:
                if redis is not None:
                    await redis.request([["GET", "bench:session"]])
                await stream.send_all(answer)
            done.clear()
    except (trio.BrokenResourceError, httptools.HttpParserError):
        pass
    finally:
        await stream.aclose()


async def main(port: int, redis_address: str, parser: str) -> None:
    redis = None
    if redis_address:
        host, _, redis_port = redis_address.rpartition(":")

        async def locate() -> tuple[str, int]:
            return host, int(redis_port)

        redis = Pool(locate, ConnectOptions(timeout=5.0), size=32)
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    await sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    serve = _serve_httptools if parser == "httptools" else _serve
    await trio.serve_listeners(lambda stream: serve(stream, redis), [trio.SocketListener(sock)])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--redis", default="", help="HOST:PORT: one GET per request")
    parser.add_argument("--parser", choices=("h11", "httptools"), default="h11")
    args = parser.parse_args()
    trio.run(main, args.port, args.redis, args.parser)
