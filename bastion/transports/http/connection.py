"""One HTTP/1.1 connection of bastion's server: h11's state, reads within the limits
(a deadline for the request head, a limit per read of a body), shielded writes, the
checks h11 leaves to its user (request smuggling shapes), and the server's own answers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import h11
import trio

__all__ = [
    "READ_SIZE",
    "REASONS",
    "ClientGone",
    "Connection",
    "HttpDate",
    "ServerLimits",
    "strict_head",
]

READ_SIZE = 64 * 1024
SERVER_NAME = b"bastion"
REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
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
    h11: h11.Connection = field(init=False)
    #: the answer being made must say ``Connection: close`` (an error, or a stop)
    closing: bool = False
    #: the bytes of the request head being read, checked once h11 has parsed it
    head: bytearray = field(default_factory=bytearray)
    reading_head: bool = True

    def __post_init__(self) -> None:
        self.h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=self.limits.max_header_bytes
        )

    def _parsed(self) -> Any:
        event = self.h11.next_event()
        if isinstance(event, h11.Request):
            unread = len(self.h11.trailing_data[0])
            head = bytes(self.head[: len(self.head) - unread])
            if len(head) > self.limits.max_header_bytes:
                raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
            strict_head(head, event)
            self.reading_head = False
            self.head.clear()
        return event

    async def _receive(self) -> bytes:
        try:
            data = bytes(await self.stream.receive_some(READ_SIZE))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise ClientGone from None
        # b"" is EOF: h11 answers ConnectionClosed, or a protocol error mid-message.
        self.h11.receive_data(data)
        if self.reading_head:
            self.head += data
        return data

    async def next_head(self) -> Any:
        """The next request (or the connection's end): an idle connection waits up to
        ``keep_alive_timeout`` for its first byte, then the whole head must arrive within
        ``header_timeout`` (a deadline, not per read: trickling bytes does not extend it)."""
        limits = self.limits
        patience = limits.header_timeout if self.head else limits.keep_alive_timeout
        deadline = trio.current_time() + patience
        while (event := self._parsed()) is h11.NEED_DATA:
            started = bool(self.head)
            with trio.move_on_at(deadline):
                data = await self._receive()
                if data and not started:
                    deadline = trio.current_time() + limits.header_timeout
                continue
            raise trio.TooSlowError
        return event

    async def next_event(self, patience: float) -> Any:
        """The next h11 event of a body, reading as needed (``patience`` s per read)."""
        while (event := self._parsed()) is h11.NEED_DATA:
            with trio.move_on_after(patience):
                await self._receive()
                continue
            raise trio.TooSlowError
        return event

    async def write(self, *events: Any) -> None:
        """Send h11 events, in one write. Shielded: a write cut half-way would leave h11's
        state and the wire apart (the application may be cancelled while it answers), but
        bounded by ``body_timeout`` so a client that stops reading cannot hold it."""
        data = b"".join(self.h11.send(event) or b"" for event in events)
        if not data:
            return
        with trio.move_on_after(self.limits.body_timeout) as scope:
            scope.shield = True
            try:
                await self.stream.send_all(data)
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
        if self.h11.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        body = f"{status} {reason}\n".encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"date", self.date.now()),
            (b"server", SERVER_NAME),
        ]
        try:
            await self.write(h11.Response(status_code=status, headers=headers, reason=reason))
            await self.write(h11.Data(data=body))
            await self.write(h11.EndOfMessage())
        except (h11.LocalProtocolError, ClientGone):
            pass


def strict_head(head: bytes, request: h11.Request) -> None:
    """What h11 tolerates but a server behind or in front of a proxy must not: lines ended
    by a bare LF, folded header lines (obs-fold), and a body framed by both Content-Length
    and Transfer-Encoding. Any of them lets two parsers see different requests
    (request smuggling): refused with 400."""
    lines = head.split(b"\n")
    if any(not line.endswith(b"\r") for line in lines[:-1]):
        raise h11.RemoteProtocolError("line ended without CR", error_status_hint=400)
    if any(line[:1] in (b" ", b"\t") for line in lines[1:]):
        raise h11.RemoteProtocolError("folded header line", error_status_hint=400)
    names = {name for name, _ in request.headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        raise h11.RemoteProtocolError(
            "both Content-Length and Transfer-Encoding", error_status_hint=400
        )
