"""bastion's own per-request work at the HTTP edge, piece by piece (fast-path issue, item 5).

No server and no sockets: the HTTP application is called in-process with ASGI messages, so
what is measured is the application alone. First the whole request on three endpoints
(``GET /healthz``: the edge and a trivial route; ``GET /.well-known/jwks.json``: a view;
``POST /v1/validate_jwt_token``: a JSON operation through the service with the memory
store in-process and SQLite), then each piece of the edge on its own, with the inputs a
browser's POST carries: reading the caller's address, the request id, CSRF, the rate-limit
lease, security and CORS headers, the metrics sample, the access-log check, the
``Set-Cookie``-free answer, and ``caller_context``.

Run: ``.venv/bin/python bench/edge_profile.py [--requests 20000]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from starlette.datastructures import Headers  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402

from bastion.core.networks import client_ip  # noqa: E402
from bastion.core.settings import settings_from_flags  # noqa: E402
from bastion.service.metrics import Metrics  # noqa: E402
from bastion.service.runtime import Runtime  # noqa: E402
from bastion.storage import StorageConfig, open_storage  # noqa: E402
from bastion.transports.http import edge  # noqa: E402
from bastion.transports.http.app import EdgeState, HttpApp, caller_context  # noqa: E402
from bastion.transports.http.wire import json_response  # noqa: E402
from bastion.web import build_http_app  # noqa: E402

ORIGIN = "http://127.0.0.1:9"
HEADERS = [
    (b"host", b"127.0.0.1:8080"),
    (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64) bench"),
    (b"accept", b"application/json"),
    (b"content-type", b"application/json"),
    (b"origin", ORIGIN.encode()),
    (b"accept-encoding", b"gzip, deflate"),
]


def _scope(method: str, path: str, body: bytes = b"") -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }


async def _one(app: HttpApp, method: str, path: str, body: bytes) -> int:
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(_scope(method, path, body), receive, send)
    return status


async def _per_request(
    app: HttpApp, method: str, path: str, body: bytes, requests: int
) -> tuple[float, int]:
    """CPU microseconds per request, and the status answered."""
    status = await _one(app, method, path, body)
    started = time.process_time()
    for _ in range(requests):
        await _one(app, method, path, body)
    return (time.process_time() - started) / requests * 1e6, status


async def _timed(piece: Callable[[], Awaitable[object]], requests: int) -> float:
    await piece()
    started = time.process_time()
    for _ in range(requests):
        await piece()
    return (time.process_time() - started) / requests * 1e6


async def main(requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        settings = settings_from_flags(
            {
                "admin-secret": "bench-admin-secret",
                "client-id": "client-1",
                "client-secret": "client-secret-1",
                "database-type": "sqlite",
                "database-url": url,
                "jwt-type": "HS256",
                "jwt-secret": "a-bench-secret-long-enough-for-hs256",
                "url": ORIGIN,
                "rate-limit-rps": "1000000",
                "rate-limit-burst": "1000000",
            }
        )
        async with open_storage(StorageConfig(database_type="sqlite", database_url=url)) as st:
            runtime = Runtime.build(settings, st, Metrics())
            app = build_http_app(runtime)
            signup = json.dumps(
                {
                    "email": "bench@example.com",
                    "password": "Bench-pass-1",
                    "confirm_password": "Bench-pass-1",
                }
            ).encode()
            token = await _signup_token(app, signup)
            validate = json.dumps({"token_type": "access_token", "token": token}).encode()
            rows = [
                ("GET /healthz", *await _per_request(app, "GET", "/healthz", b"", requests)),
                (
                    "GET /.well-known/jwks.json",
                    *await _per_request(app, "GET", "/.well-known/jwks.json", b"", requests),
                ),
                (
                    "POST /v1/validate_jwt_token",
                    *await _per_request(
                        app, "POST", "/v1/validate_jwt_token", validate, requests // 4
                    ),
                ),
            ]
            print("whole request, in-process (CPU microseconds per request):")
            for name, micros, status in rows:
                print(f"  {name:32} {micros:8.1f} us  (status {status})")
            await _pieces(app, runtime, requests)


async def _signup_token(app: HttpApp, body: bytes) -> str:
    answer: dict[str, Any] = {}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            answer.update(json.loads(message["body"]))

    await app(_scope("POST", "/v1/signup", body), receive, send)
    return str(answer["access_token"])


async def _pieces(app: HttpApp, runtime: Runtime, requests: int) -> None:
    scope = _scope("POST", "/v1/validate_jwt_token", b"{}")
    headers = Headers(scope=scope)
    security = app.security

    async def address() -> object:
        return client_ip(
            "127.0.0.1", Headers(scope=scope).get("x-forwarded-for"), runtime.trusted_proxies
        )

    async def request_id() -> object:
        return edge.request_id(headers.get("x-request-id"))

    async def csrf() -> object:
        return edge.csrf_refusal(
            "POST", "/v1/validate_jwt_token", Headers(scope=scope), runtime.origins
        )

    async def lease() -> object:
        await runtime.rate_limiter.check("127.0.0.1", surface="http")
        return None

    async def answer_headers() -> object:
        response = json_response({"is_valid": True})
        raw = response.raw_headers
        present = {name for name, _ in raw}
        raw.extend(header for header in security if header[0] not in present)
        raw.append((b"vary", b"Origin"))
        for name, value in edge.cors_headers(ORIGIN, runtime.origins).items():
            raw.append((name.lower().encode(), value.encode("latin-1")))
        raw.append((b"x-request-id", b"0" * 32))
        return response

    async def sample() -> object:
        app._sample("POST", "/v1/validate_jwt_token", 200).observe(0.001)
        return None

    async def access() -> object:
        import logging

        return logging.getLogger("bastion.access").isEnabledFor(logging.INFO)

    async def caller() -> object:
        request_scope = dict(scope)
        request_scope["bastion.edge"] = EdgeState("127.0.0.1", "r")
        return caller_context(Request(request_scope))

    async def bare_response() -> object:
        return Response(b"{}", media_type="application/json")

    pieces = [
        ("client address (--trusted-proxies)", address),
        ("request id", request_id),
        ("CSRF decision", csrf),
        ("rate-limit lease (in-process)", lease),
        ("answer + security/CORS headers", answer_headers),
        ("bare Starlette response", bare_response),
        ("metrics sample (counter + histogram)", sample),
        ("access-log level check", access),
        ("caller_context", caller),
    ]
    print("edge pieces on their own (CPU microseconds per request):")
    total = 0.0
    for name, piece in pieces:
        micros = await _timed(piece, requests)
        if piece is not bare_response:
            total += micros
        print(f"  {name:40} {micros:6.2f} us")
    print(f"  {'sum of the edge pieces':40} {total:6.2f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20000)
    trio.run(main, parser.parse_args().requests)
