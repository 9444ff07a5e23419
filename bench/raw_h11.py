"""The ceiling the fast-path issue measures against: a bare trio + h11 loop answering every
request with one small JSON document, nothing else (no routing, no limits, no timeouts).

Each process binds its own socket to the port with ``SO_REUSEPORT``, so several processes
share it and the kernel spreads connections between them. Run (what ``bench/fast_path.py``
does): ``.venv/bin/python bench/raw_h11.py PORT`` once per process.
"""

from __future__ import annotations

import socket
import sys

import h11
import trio

BODY = b'{"ok":true}'
HEADERS = [("content-type", "application/json"), ("content-length", str(len(BODY)))]


async def _serve(stream: trio.SocketStream) -> None:
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


async def main(port: int) -> None:
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    await sock.bind(("127.0.0.1", port))
    sock.listen(1024)
    await trio.serve_listeners(_serve, [trio.SocketListener(sock)])


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]))
