"""A single-page app on another origin, in headless Chromium: listed in --allowed-origins
it signs up and reads the profile with the session cookie (credentialed CORS); an
unlisted origin in the same browser gets nothing with that cookie.

The app is on another port of ``localhost``: another origin, the same site, so the
browser treats the session cookie as first-party (browsers increasingly block
third-party cookies, which is why the README recommends same-site hosts for an app
that signs in with cookies)."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.node_project import node_for
from tests.server.harness import base_flags, free_port, running

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
PAGE = b"<!doctype html><title>app</title><p>a single-page app on another site</p>"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def pages() -> Iterator[tuple[int, int]]:
    """Two static apps on other ports of localhost."""
    servers = [ThreadingHTTPServer(("127.0.0.1", free_port()), _Page) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers[0].server_address[1], servers[1].server_address[1]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_listed_spa_uses_the_cookie_and_an_unlisted_one_gets_nothing(
    pages: tuple[int, int], tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is not installed (apt-get install chromium)")
    node = node_for(
        PROJECT, PROJECT / "node_modules" / "playwright-core" / "package.json", "browser test"
    )
    listed, unlisted = (f"http://localhost:{port}" for port in pages)
    # "*" and one listed app: anyone may read public data, only the app with cookies.
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path)), f"--allowed-origins=*,{listed}"]
    api_port = free_port()
    flags += [f"--url=http://localhost:{api_port}"]
    with running(flags, tmp_path, http_port=api_port) as server:
        email = f"spa-{uuid.uuid4().hex[:10]}@example.com"
        done = subprocess.run(
            [
                node,
                "cross_origin.mjs",
                f"http://localhost:{server.http_port}",
                listed,
                unlisted,
                email,
                "Spa!pass1",
            ],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["listed"] == {
        "signup": 200,
        "profile": 200,
        "email": email,
        "session": 200,
        "sessionToken": True,
    }, seen
    assert seen["unlisted"]["profile"] == "blocked", seen
    assert seen["unlisted"]["session"] == "blocked", seen
    assert seen["unlisted"]["meta"] == 200, seen  # public data stays readable by anyone
