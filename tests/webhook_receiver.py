"""A real HTTP receiver for webhook tests: a small threaded ``http.server`` in the test process.

It records every request (headers, body) and answers from a script: a list of
``(status, delay)`` steps consumed one per request, then the default step. A receiver can
verify bastion's signature the way a real one would (:meth:`Received.signature_ok`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signature_ok(self, secret: str, *, max_age: float = 300) -> bool:
        """What a receiver does: fresh timestamp, HMAC-SHA256 over ``<timestamp>.<body>``."""
        timestamp = self.headers["x-authorizer-timestamp"]
        if abs(time.time() - int(timestamp)) > max_age:
            return False
        expected = hmac.new(
            secret.encode(), timestamp.encode() + b"." + self.body, hashlib.sha256
        ).hexdigest()
        return hmac.compare_digest(expected, self.headers["x-authorizer-signature"])


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.script: list[tuple[int, float]] = []
        self.default: tuple[int, float] = (200, 0.0)
        self.arrived = threading.Condition()
        #: Set to hold every request until it is set (a delivery in flight).
        self.release: threading.Event | None = None
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def wait_for(self, count: int, timeout: float = 60) -> list[Received]:
        """Block until ``count`` requests arrived (or fail after ``timeout``)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"{len(self.received)} requests arrived, wanted {count}")
            return list(self.received)

    def _step(self) -> tuple[int, float]:
        with self.arrived:
            return self.script.pop(0) if self.script else self.default

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                with receiver.arrived:
                    receiver.received.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    receiver.arrived.notify_all()
                if receiver.release is not None:
                    receiver.release.wait(120)
                status, delay = receiver._step()
                time.sleep(delay)
                answer = json.dumps({"received": True, "status": status}).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the caller gave up (timeout) or died

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    @contextmanager
    def running(self) -> Iterator[Receiver]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        self._server = server
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            if self.release is not None:
                self.release.set()
            server.shutdown()
            server.server_close()
            thread.join(10)


@contextmanager
def receiver() -> Iterator[Receiver]:
    with Receiver().running() as running:
        yield running
