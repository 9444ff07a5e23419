"""A webhook receiver the suite starts itself: records every POST, answers a fixed body."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = b"conformance receiver: ok"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    host: str
    port: int
    received: list[Received] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}/{path.lstrip('/')}"

    def wait_for(self, path: str, timeout: float = 30.0) -> list[Received]:
        """The posts to ``path`` once at least one arrived, or [] after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            hits = [r for r in list(self.received) if r.path.rstrip("/").endswith(path)]
            if hits or time.monotonic() > deadline:
                return hits
            time.sleep(0.1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        self.server.receiver.received.append(
            Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        )
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, format: str, *args: object) -> None:
        return


_lock = threading.Lock()
_started: dict[str, Receiver] = {}


def receiver(bind: str = "127.0.0.1", advertised: str | None = None) -> Receiver:
    """The process's one receiver on ``bind`` (started on first use, a daemon thread)."""
    with _lock:
        if bind not in _started:
            server = _Server((bind, 0), _Handler)
            server.receiver = Receiver(advertised or bind, int(server.server_address[1]))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            _started[bind] = server.receiver
        return _started[bind]
