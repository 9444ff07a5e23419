"""One HTTP/1.1 connection of bastion's server: its protocol state
(:mod:`transports.http.protocol`), reads within the limits (a deadline for the request
head, a limit per read of a body), shielded writes, and the server's own answers."""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from email.utils import formatdate

import trio

from bastion.transports.http.protocol import (
    IDLE,
    NEED_DATA,
    SEND_RESPONSE,
    Data,
    EndOfMessage,
    Event,
    InformationalResponse,
    LocalProtocolError,
    Response,
    ServerConnection,
    Signal,
)

__all__ = [
    "READ_SIZE",
    "REASONS",
    "ClientGone",
    "Connection",
    "HttpDate",
    "ServerLimits",
]

READ_SIZE = 64 * 1024
SERVER_NAME = b"bastion"
REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
}


@dataclass(frozen=True, slots=True)
class ServerLimits:
    max_header_bytes: int = 64 * 1024
    max_body_bytes: int = 1024 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 1000
    shutdown_timeout: float = 10.0
    #: At a stop, how long after closing its listeners the server goes on answering
    #: keep-alive before it tells clients to close. Non-zero where other processes share
    #: the listening socket (``--workers``): the port stays open until the last of them
    #: closes its copy, and a client told to close meanwhile could reconnect into a
    #: backlog that the last close resets.
    stop_settle: float = 0.0


class ClientGone(Exception):
    """The peer closed or reset the connection."""


@dataclass(slots=True)
class HttpDate:
    """The ``Date`` header, formatted at most once a second."""

    second: int = -1
    value: bytes = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self.second:
            self.second, self.value = second, formatdate(second, usegmt=True).encode()
        return self.value


@dataclass(slots=True, eq=False)
class Connection:
    stream: trio.abc.Stream
    limits: ServerLimits
    date: HttpDate
    http: ServerConnection = field(init=False)
    #: the answer being made must say ``Connection: close`` (an error, or a stop)
    closing: bool = False
    #: the plain TCP socket, read and written at once when it is ready (None: TLS)
    socket: trio.socket.SocketType | None = field(init=False)
    #: the last read had to wait (and so was a checkpoint)
    waited: bool = False
    #: how long, at most, a wait for the next request lasts (a stop shortens it)
    idle_grace: float = math.inf
    #: what cuts the wait for the next request's first byte, while one is under way
    idle_wait: trio.CancelScope | None = None

    def __post_init__(self) -> None:
        self.http = ServerConnection(self.limits.max_header_bytes)
        stream = self.stream
        self.socket = stream.socket if isinstance(stream, trio.SocketStream) else None

    async def _receive(
        self, patience: float, deadline: float = math.inf, *, idle: bool = False
    ) -> None:
        """Feed the protocol what the client sends next, waiting ``patience`` s and not past
        ``deadline`` (trio.TooSlowError after). A plain socket holding data is read at once,
        without a cancel scope or a trip through trio's scheduler. ``idle``: the wait for a
        request's first byte, which :meth:`stop_waiting` can cut short."""
        sock = self.socket
        data = None if sock is None else _read_now(sock)
        if data is None:
            self.waited = True
            with trio.move_on_at(min(deadline, trio.current_time() + patience)) as waiting:
                if idle:
                    self.idle_wait = waiting
                try:
                    if sock is None:
                        data = bytes(await self.stream.receive_some(READ_SIZE))
                    else:
                        while data is None:
                            await trio.lowlevel.wait_readable(sock)
                            data = _read_now(sock)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    raise ClientGone from None
                finally:
                    self.idle_wait = None
            if data is None:
                raise trio.TooSlowError
        # b"" is EOF: ConnectionClosed, or a protocol error mid-message.
        self.http.receive_data(data)

    async def next_head(self) -> Event:
        """The next request (or the connection's end): an idle connection waits up to
        ``keep_alive_timeout`` for its first byte, then the whole head must arrive within
        ``header_timeout`` (a deadline, not per read: trickling bytes does not extend it).
        A checkpoint, whether or not it had to wait (once per request, where a read and a
        write through trio's streams took two trips through the scheduler)."""
        limits = self.limits
        self.waited = False
        deadline = math.inf
        http = self.http
        if not http.head_begun:  # idle: the protocol would only say NEED_DATA
            await self._receive(min(limits.keep_alive_timeout, self.idle_grace), idle=True)
        while (event := http.next_event()) is NEED_DATA:
            if deadline == math.inf:  # the head has begun: from now on, its deadline
                deadline = trio.current_time() + limits.header_timeout
            await self._receive(math.inf, deadline)
        if not self.waited:
            await trio.lowlevel.checkpoint()
        assert not isinstance(event, Signal)
        return event

    def stop_waiting(self, grace: float) -> None:
        """A stop: from now on a wait for the next request lasts at most ``grace`` s (one
        under way too); a request head already begun is still read whole."""
        self.idle_grace = grace
        if self.idle_wait is not None:
            self.idle_wait.deadline = min(self.idle_wait.deadline, trio.current_time() + grace)

    async def next_event(self, patience: float) -> Event | Signal:
        """The next event of a body, reading as needed (``patience`` s per read)."""
        while (event := self.http.next_event()) is NEED_DATA:
            await self._receive(patience)
        return event

    async def write(
        self, *events: InformationalResponse | Response | Data | EndOfMessage, head: bytes = b""
    ) -> None:
        """Send events, after ``head`` (bytes the protocol has already accounted for), in
        one write. A plain socket with room takes it at once (no cancel scope, no wait).
        Otherwise shielded: a write cut half-way would leave the protocol's state and the
        wire apart (the application may be cancelled while it answers), but bounded by
        ``body_timeout`` so a client that stops reading cannot hold it."""
        data = b"".join([head, *(self.http.send(event) for event in events)])
        if not data:
            return
        sent = 0
        sock = self.socket
        if sock is not None:
            try:
                sent = os.write(sock.fileno(), data)
            except BlockingIOError:
                pass
            except OSError:
                raise ClientGone from None
            if sent == len(data):
                return
        with trio.move_on_after(self.limits.body_timeout) as scope:
            scope.shield = True
            try:
                await self.stream.send_all(memoryview(data)[sent:])
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise ClientGone from None
        if scope.cancelled_caught:
            raise ClientGone

    async def linger_close(self) -> None:
        """Close after an answer whose request was not read to its end: send FIN first and
        discard what still arrives for a moment, or the kernel resets the connection and
        the client may lose the answer."""
        try:
            if isinstance(self.stream, trio.SocketStream):
                await self.stream.send_eof()
            with trio.move_on_after(1.0):
                while await self.stream.receive_some(READ_SIZE):
                    pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    async def simple(self, status: int, reason: str) -> None:
        """A plain answer of the server's own (errors before or around the application)."""
        if self.http.our_state not in (IDLE, SEND_RESPONSE):
            return
        body = f"{status} {reason}\n".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"date", self.date.now()),
            (b"server", SERVER_NAME),
        ]
        with contextlib.suppress(LocalProtocolError, ClientGone):
            await self.write(Response(status, headers, reason.encode()), Data(body), EndOfMessage())


def _read_now(sock: trio.socket.SocketType) -> bytes | None:
    """What ``sock`` holds now (b"": the client's end of sending), None when nothing yet."""
    try:
        return os.read(sock.fileno(), READ_SIZE)
    except BlockingIOError:
        return None
    except OSError:  # reset, or closed (-1) by a stop
        raise ClientGone from None
