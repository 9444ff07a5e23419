"""Keep-alive connections of a real server process stay usable, and are closed when they must be.

The bug these guard against: an answer given before the request body had arrived (CSRF
403, unknown route 404, 405, 413) left the connection open but dead, so the client's next
request on it was never answered (a 30 s client timeout); and an idle keep-alive connection
was never closed. Talks HTTP/1.1 over raw sockets (h11 builds and parses the bytes), so the
test decides exactly what is sent when, and on which connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import h11
import httpx
import pytest

from tests.server.harness import HTTP_SERVERS, ServerProcess, base_flags, running

#: Long enough to mean "never" for a server on loopback; only a hang reaches it.
HANG = 30.0
ONE_MIB = 1024 * 1024


@pytest.fixture(scope="module", params=HTTP_SERVERS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("keepalive")
    flags = [*base_flags("sqlite", str(tmp / "bastion.db")), f"--http-server={request.param}"]
    with running(flags, tmp) as srv:
        yield srv


class Connection:
    """One client HTTP/1.1 connection: requests go out in pieces, answers come back whole."""

    def __init__(self, server: ServerProcess) -> None:
        self.origin = server.url
        self.sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=HANG)
        self.h11 = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        self.sock.close()

    def send_head(self, method: str, path: str, headers: dict[str, str], length: int) -> None:
        fields = [("host", "127.0.0.1"), ("content-length", str(length)), *headers.items()]
        self._send(h11.Request(method=method, target=path, headers=fields))

    def send_body(self, body: bytes) -> None:
        self._send(h11.Data(data=body))
        self._send(h11.EndOfMessage())

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> h11.Response:
        self.send_head(method, path, headers or {}, len(body))
        self.send_body(body)
        return self.response()

    def response(self) -> h11.Response:
        """The next answer, read to its end; the connection is ready for the next request."""
        answer: h11.Response | None = None
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                answer = event
            elif isinstance(event, h11.EndOfMessage):
                assert answer is not None
                if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
                    self.h11.start_next_cycle()
                return answer
            elif isinstance(event, h11.ConnectionClosed):
                raise AssertionError("the server closed the connection without an answer")

    def closed_by_server(self) -> bool:
        """True once the server ends the connection (EOF or reset); False if it never does."""
        try:
            while chunk := self.sock.recv(65536):
                assert not chunk.strip(), f"unexpected bytes after the answer: {chunk[:80]!r}"
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return True

    def _send(self, event: h11.Event) -> None:
        data = self.h11.send(event)
        if data:
            self.sock.sendall(data)


def header(response: h11.Response, name: str) -> str | None:
    for key, value in response.headers:
        if key.decode() == name:
            return value.decode()
    return None


JSON = {"content-type": "application/json"}

#: Answers the edge gives without reading the body: (method, path, extra headers, status).
EARLY_ANSWERS = [
    pytest.param("POST", "/v1/no_such_route", {"origin": "self", **JSON}, 404, id="404-v1"),
    pytest.param("POST", "/no_such_page", JSON, 404, id="404-outside-v1"),
    pytest.param("POST", "/v1/meta", {"origin": "self", **JSON}, 405, id="405"),
    pytest.param("PUT", "/healthz", {}, 405, id="405-health"),
    pytest.param("POST", "/v1/login", JSON, 403, id="403-no-origin"),
    pytest.param(
        "POST",
        "/graphql",
        {"origin": "self", "content-type": "text/plain"},
        403,
        id="403-form-post",
    ),
]


def _headers(server: ServerProcess, extra: dict[str, str]) -> dict[str, str]:
    return {k: server.url if v == "self" else v for k, v in extra.items()}


@pytest.mark.parametrize("size", [1, 100_000], ids=["small-body", "body-over-one-read"])
@pytest.mark.parametrize(("method", "path", "extra", "status"), EARLY_ANSWERS)
def test_a_body_sent_after_the_head_still_leaves_the_connection_usable(
    server: ServerProcess, method: str, path: str, extra: dict[str, str], status: int, size: int
) -> None:
    conn = Connection(server)
    try:
        conn.send_head(method, path, _headers(server, extra), size)
        # Give the edge time to decide before the body arrives (the case that broke the
        # connection). Under load the body may arrive first: that only makes this case
        # easier, it never makes a working server fail.
        time.sleep(0.2)
        conn.send_body(b"x" * size)
        refused = conn.response()
        assert refused.status_code == status
        assert header(refused, "connection") != "close"
        # The same connection serves the next request, twice over.
        assert conn.request("GET", "/healthz").status_code == 200
        assert conn.request("GET", "/v1/meta").status_code == 200
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("path", "status"),
    [("/v1/admin/login", 413), ("/v1/no_such_route", 404), ("/graphql", 413)],
)
def test_a_body_over_the_limit_is_answered_and_the_connection_closed(
    server: ServerProcess, path: str, status: int
) -> None:
    conn = Connection(server)
    try:
        # Announce more than the limit, send only part of it: the server must answer and
        # hang up rather than wait for (or silently drop) the rest.
        headers = {"origin": server.url, **JSON}
        conn.send_head("POST", path, headers, 2 * ONE_MIB)
        conn.sock.sendall(b"x" * 100_000)
        refused = conn.response()
        assert refused.status_code == status
        assert header(refused, "connection") == "close"
        assert conn.closed_by_server(), "the connection was left open after Connection: close"
    finally:
        conn.close()


@pytest.mark.parametrize("first", ["GET", "POST-404"])
def test_an_idle_keep_alive_connection_is_closed_by_the_server(
    server: ServerProcess, first: str
) -> None:
    conn = Connection(server)
    try:
        if first == "GET":
            assert conn.request("GET", "/healthz").status_code == 200
        else:
            headers = {"origin": server.url, **JSON}
            answer = conn.request("POST", "/v1/no_such_route", headers, b"{}")
            assert answer.status_code == 404
        # The keep-alive timeout is a few seconds; a server that never closes reaches HANG.
        assert conn.closed_by_server(), "an idle keep-alive connection was never closed"
    finally:
        conn.close()


def test_one_keep_alive_client_mixing_refusals_with_bodies_and_normal_calls(
    server: ServerProcess,
) -> None:
    """The pattern that used to hang about one call in twenty: every call is answered."""
    origin = {"origin": server.url}
    sizes = [0, 10, 70_000, 300_000, 900_000]
    with httpx.Client(base_url=server.url, timeout=HANG) as client:
        for round_ in range(3):
            for size in sizes:
                body = b"{" + b" " * max(0, size - 2) + b"}" if size else b""
                calls = [
                    (
                        client.post("/v1/no_such_route", content=body, headers={**origin, **JSON}),
                        404,
                    ),
                    (client.post("/no_such_page", content=body, headers=JSON), 404),
                    (client.post("/v1/meta", content=body, headers={**origin, **JSON}), 405),
                    (client.post("/v1/login", content=body, headers=JSON), 403),
                    (client.get("/v1/meta"), 200),
                    (
                        client.post(
                            "/graphql", json={"query": "{ meta { client_id } }"}, headers=origin
                        ),
                        200,
                    ),
                ]
                for response, status in calls:
                    assert response.status_code == status, (round_, size, response.text)


def test_a_rate_limited_call_with_a_body_leaves_the_connection_usable(tmp_path: Path) -> None:
    """The 429 is an early answer too (a budget of two calls that refills only after minutes)."""
    flags = [
        f for f in base_flags("sqlite", str(tmp_path / "bastion.db")) if "--rate-limit" not in f
    ]
    flags += ["--rate-limit-rps=0.01", "--rate-limit-burst=2"]
    with running(flags, tmp_path) as limited:
        conn = Connection(limited)
        try:
            statuses = []
            for _ in range(4):
                conn.send_head("POST", "/v1/meta", {"origin": limited.url, **JSON}, 50_000)
                time.sleep(0.05)
                conn.send_body(b"x" * 50_000)
                answer = conn.response()
                assert header(answer, "connection") != "close"
                statuses.append(answer.status_code)
            assert statuses == [405, 405, 429, 429]
            assert conn.request("GET", "/healthz").status_code == 200  # exempt from the limit
        finally:
            conn.close()
