"""An HTTP proxy in front of a real server that rewrites chosen answers: a deployment
made deliberately wrong in one behaviour, for tests that the suite notices."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


#: (method, path with query, the upstream's answer) -> the answer to give instead.
Rewrite = Callable[[str, str, Answer], Answer]
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: httpx.Client
    rewrite: Rewrite


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP | {"host"}}
        answer = self.server.upstream.request(
            self.command, self.path, content=body, headers=headers
        )
        got = Answer(
            answer.status_code,
            [(k, v) for k, v in answer.headers.multi_items() if k.lower() not in _HOP],
            answer.content,
        )
        given = self.server.rewrite(self.command, self.path, got)
        self.send_response(given.status)
        for name, value in given.headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(given.body)))
        self.end_headers()
        self.wfile.write(given.body)

    do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = _forward

    def log_message(self, format: str, *args: object) -> None:
        return


@contextmanager
def rewriting(upstream: str, rewrite: Rewrite) -> Iterator[str]:
    """The proxy's base URL while the block runs."""
    server = _Server(("127.0.0.1", 0), _Handler)
    # A proxy keeps no cookies: each client's own go through, and only theirs.
    jar = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    server.upstream = httpx.Client(base_url=upstream, timeout=30, cookies=jar)
    server.rewrite = rewrite
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        server.upstream.close()
