"""One access-log line per request, and the request id a caller can follow through it:
``X-Request-Id`` kept when it is a plain token, replaced when not; the query string (it
may carry a token) never reaches the log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.harness import ServerProcess, base_flags, fresh_sqlite_url, running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("access-log")
    flags = [f for f in base_flags("sqlite", fresh_sqlite_url(tmp)) if "log-level" not in f]
    with running([*flags, "--log-level=info"], tmp) as srv:
        yield srv


def access_lines(server: ServerProcess, request_id: str) -> list[dict[str, object]]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in server.stderr().splitlines() if line.startswith("{")]
        found = [
            line for line in lines
            if line.get("logger") == "bastion.access" and line.get("request_id") == request_id
        ]  # fmt: skip
        if found:
            return found
        time.sleep(0.1)
    return []


def test_a_callers_request_id_is_kept_answered_and_logged(server: ServerProcess) -> None:
    with server.client() as http:
        answer = http.get("/healthz?token=do-not-log-me", headers={"x-request-id": "req-42.a"})
    assert answer.headers["x-request-id"] == "req-42.a"
    (line,) = access_lines(server, "req-42.a")
    assert line["method"] == "GET"
    assert line["path"] == "/healthz"
    assert line["status"] == 200
    assert isinstance(line["duration_ms"], float)
    assert line["client_ip"] == "127.0.0.1"
    assert "do-not-log-me" not in server.stderr()


@pytest.mark.parametrize("presented", [None, "has spaces", "x" * 129, "new\\nline"])
def test_a_missing_or_malformed_id_is_replaced(
    server: ServerProcess, presented: str | None
) -> None:
    headers = {} if presented is None else {"x-request-id": presented}
    with server.client() as http:
        answer = http.post("/v1/admin/login", json={"admin_secret": "wrong"}, headers=headers)
    assert answer.status_code == 401
    given = answer.headers["x-request-id"]
    assert given != presented
    assert len(given) == 32
    (line,) = access_lines(server, given)
    assert line["status"] == 401


def test_access_log_off_writes_no_line_but_keeps_the_id(tmp_path: Path) -> None:
    flags = [f for f in base_flags("sqlite", fresh_sqlite_url(tmp_path)) if "log-level" not in f]
    with running([*flags, "--log-level=info", "--access-log=false"], tmp_path) as quiet:
        with quiet.client() as http:
            answer = http.get("/healthz", headers={"x-request-id": "quiet-1"})
        assert answer.headers["x-request-id"] == "quiet-1"
        # A line the server writes after the request: its log is flushed past that point.
        with quiet.client() as http:
            http.post("/v1/admin/login", json={"admin_secret": "wrong"})
    assert "quiet-1" not in quiet.stderr()
    assert "bastion listening" in quiet.stderr()


def test_text_log_format_writes_readable_lines(tmp_path: Path) -> None:
    flags = [f for f in base_flags("sqlite", fresh_sqlite_url(tmp_path)) if "log-level" not in f]
    with running([*flags, "--log-level=info", "--log-format=text"], tmp_path) as server:
        with server.client() as http:
            http.get("/healthz?token=do-not-log-me", headers={"x-request-id": "text-7"})
        deadline = time.monotonic() + 10
        while "text-7" not in server.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
    lines = server.stderr().splitlines()
    (access,) = [line for line in lines if '"text-7"' in line]
    assert " bastion.access: request " in access
    assert 'path="/healthz"' in access
    assert "status=200" in access
    assert not any(line.startswith("{") for line in lines), lines[:3]
    assert "do-not-log-me" not in server.stderr()
