"""SIGTERM under keep-alive load loses no request: a real server process, 20 clients each
sending requests back to back on its own keep-alive connection, then SIGTERM.

The bug this guards against: at a stop bastion's own server closed its listeners and its
idle connections at once and let a busy one end without ``Connection: close``, so a client
whose connection was between two requests, or whose answer had just come, had its next
request reset (7 of 20 clients in a measurement). Now each client is answered until it is
told ``Connection: close``, and then finds the port closed. The clients talk HTTP/1.1 over
raw sockets (h11 builds and parses the bytes) so that every request sent is accounted for.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import h11
import pytest

from tests.server.harness import ServerProcess, base_flags, running

CLIENTS = 20
#: Long enough to mean "never" for a server on loopback; only a hang reaches it.
HANG = 30.0


@dataclass
class Tally:
    """What one client saw."""

    answered: int = 0
    #: requests sent that got no whole answer (a reset, or the connection's end)
    lost: int = 0
    #: answers that said ``Connection: close`` (the server says it only once stopping)
    told_to_close: int = 0
    #: a connection attempt after the last ``Connection: close`` was refused
    refused: bool = False


class Client(threading.Thread):
    """Sends ``GET /healthz`` back to back on one keep-alive connection; when an answer
    says ``Connection: close`` (or the connection breaks) it connects again, and stops
    once that is refused."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(daemon=True)
        self.port = server.http_port
        self.tally = Tally()
        self.first_answer = threading.Event()

    def run(self) -> None:
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), timeout=HANG)
            except ConnectionRefusedError:
                self.tally.refused = True
                return
            with sock:
                self._requests(sock)

    def _requests(self, sock: socket.socket) -> None:
        """Requests on one connection until it ends, the way it ended counted."""
        conn = h11.Connection(h11.CLIENT)
        request = h11.Request(method="GET", target="/healthz", headers=[("host", "bastion")])
        while True:
            try:
                for event in (request, h11.EndOfMessage()):
                    sock.sendall(conn.send(event) or b"")
                keep_alive = self._answer(sock, conn)
            except (OSError, h11.RemoteProtocolError):
                self.tally.lost += 1
                return
            self.tally.answered += 1
            self.first_answer.set()
            if not keep_alive:
                self.tally.told_to_close += 1
                return
            conn.start_next_cycle()

    @staticmethod
    def _answer(sock: socket.socket, conn: h11.Connection) -> bool:
        """Read one whole answer; whether the connection stays open after it."""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(65536))
            elif isinstance(event, h11.EndOfMessage):
                return conn.their_state is h11.DONE
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the connection ended without an answer")


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_under_keep_alive_load_answers_every_request_sent(
    tmp_path: Path, workers: int
) -> None:
    flags = [
        *base_flags("sqlite", str(tmp_path / "bastion.db")),
        "--http-server=h11",
        f"--workers={workers}",
    ]
    with running(flags, tmp_path) as server:
        clients = [Client(server) for _ in range(CLIENTS)]
        for client in clients:
            client.start()
        for client in clients:
            assert client.first_answer.wait(HANG)
        time.sleep(1.0)  # load, not a limit: when the signal comes does not matter
        server.process.send_signal(signal.SIGTERM)
        for client in clients:
            client.join(HANG)
        assert server.process.wait(HANG) == 0
    tallies = [client.tally for client in clients]
    assert [t.lost for t in tallies] == [0] * CLIENTS
    assert all(t.told_to_close == 1 and t.refused for t in tallies), tallies
    assert not any(client.is_alive() for client in clients)
