"""A single-page app on another origin, in headless Chromium: listed in --allowed-origins
it signs up and reads the profile with the session cookie (credentialed CORS); an
unlisted origin in the same browser gets nothing with that cookie. The signed-in browser
follows ``/authorize`` redirects: a target another parser reads differently is refused, a
listed one receives its code.

The app is on another port of ``localhost``: another origin, the same site, so the
browser treats the session cookie as first-party (browsers increasingly block
third-party cookies, which is why the README recommends same-site hosts for an app
that signs in with cookies)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.node_project import node_for
from tests.server.harness import CLIENT_ID, base_flags, free_port, running

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
PAGE = b"<!doctype html><title>app</title><p>a single-page app on another site</p>"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.seen.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:
        return


class _Recording(ThreadingHTTPServer):
    """A static page server that remembers every path asked of it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: list[str] = []


def _node() -> str:
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is not installed (apt-get install chromium)")
    return node_for(
        PROJECT, PROJECT / "node_modules" / "playwright-core" / "package.json", "browser test"
    )


@pytest.fixture
def pages() -> Iterator[tuple[_Recording, _Recording]]:
    """Two static apps on other ports of localhost."""
    servers = [_Recording(("127.0.0.1", free_port()), _Page) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_a_listed_spa_uses_the_cookie_and_an_unlisted_one_gets_nothing(
    pages: tuple[_Recording, _Recording], tmp_path: Path
) -> None:
    node = _node()
    listed, unlisted = (f"http://localhost:{page.server_address[1]}" for page in pages)
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


def _authorize(api: str, redirect_uri: str, challenge: str) -> str:
    return (
        f"{api}/authorize?client_id={CLIENT_ID}&response_type=code&state=s1"
        f"&code_challenge={challenge}&code_challenge_method=S256"
        f"&redirect_uri={quote(redirect_uri, safe='')}"
    )


def test_a_backslash_target_is_refused_and_a_listed_one_gets_its_code(
    pages: tuple[_Recording, _Recording], tmp_path: Path
) -> None:
    """Issue #36 (1) in the browser: ``http://127.0.0.1:<attacker>\\@localhost:<api>/cb``
    is bastion's own origin to urlsplit and the attacker's to Chromium. The signed-in
    victim's browser is not sent there (the attacker's server hears nothing); a plain
    target on the listed app receives the code, which redeems with the right verifier."""
    node = _node()
    app, attacker = pages
    app_url = f"http://localhost:{app.server_address[1]}"
    api_port = free_port()
    api = f"http://localhost:{api_port}"
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path)),
        f"--allowed-origins={app_url}",
        f"--url={api}",
    ]
    verifier = "browser-verifier-" + "x" * 40
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    challenge_text = challenge.rstrip(b"=").decode()
    confusing = f"http://127.0.0.1:{attacker.server_address[1]}\\@localhost:{api_port}/cb"
    with running(flags, tmp_path, http_port=api_port):
        done = subprocess.run(
            [
                node,
                "redirects.mjs",
                api,
                _authorize(api, confusing, challenge_text),
                _authorize(api, f"{app_url}/cb", challenge_text),
                f"redirect-{uuid.uuid4().hex[:10]}@example.com",
                "Redirect!pass1",
            ],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen["signup"] == 200, seen
        assert attacker.seen == [], attacker.seen
        assert seen["refused"]["status"] == 400, seen
        assert seen["refused"]["url"].startswith(f"{api}/authorize?"), seen
        landed = urlsplit(seen["allowed"]["url"])
        assert f"{landed.scheme}://{landed.netloc}{landed.path}" == f"{app_url}/cb", seen
        assert [p.split("?")[0] for p in app.seen if p != "/favicon.ico"] == ["/cb"], app.seen
        code = parse_qs(landed.query)["code"][0]
        token = httpx.post(
            f"{api}/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": f"{app_url}/cb",
                "client_id": CLIENT_ID,
                "code_verifier": verifier,
            },
        )
    assert token.status_code == 200, token.text
    assert token.json()["access_token"]
