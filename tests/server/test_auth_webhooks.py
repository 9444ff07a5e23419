"""The flows' webhook events reach a registered endpoint through the outbox."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, base_flags, running
from tests.server.test_auth_flows import bearer, client_for, new_user


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        type(self).received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    handler = type("Receiver", (_Receiver,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler.received
    finally:
        server.shutdown()
        server.server_close()


def _wait_for(received: list[dict[str, Any]], event: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for body in received:
            if body.get("event_name") == event:
                return body
        time.sleep(0.1)
    raise AssertionError(f"no {event} delivered; got {[b.get('event_name') for b in received]}")


def test_signup_login_and_deactivation_events(
    tmp_path: Path, receiver: tuple[str, list[dict[str, Any]]]
) -> None:
    endpoint, received = receiver
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path)), "--webhook-allow-private-targets"]
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    with running(flags, tmp_path) as srv, client_for(srv) as client:
        for event in ("user.created", "user.login", "user.deactivated"):
            added = client.post(
                "/v1/admin/add_webhook",
                json={"event_name": event, "endpoint": endpoint, "enabled": True},
                headers=admin,
            )
            assert added.status_code == 200, added.text
        email, tokens = new_user(client)
        created = _wait_for(received, "user.created")
        assert created["user"]["email"] == email
        logged = _wait_for(received, "user.login")
        assert logged["user"]["id"] == tokens["user"]["id"]
        assert logged["auth_recipe"] == "basic_auth"
        done = client.post(
            "/v1/deactivate_account", json={}, headers=bearer(tokens["access_token"])
        )
        assert done.status_code == 200
        gone = _wait_for(received, "user.deactivated")
        assert gone["user"]["revoked_timestamp"] is not None
