"""One request and its response on a connection, as the ASGI application sees them: the
``scope``, ``receive`` (the body within its limits, ``100 Continue`` when the client waits
for it) and ``send`` (the response's head checked, and written with the first piece of
its body). :mod:`transports.http.server` runs one exchange at a time per connection.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_to_bytes

import trio

from bastion.transports.http.connection import ClientGone, Connection
from bastion.transports.http.protocol import (
    BLANKS,
    NAME_BYTES,
    VALUE_BYTES,
    Data,
    EndOfMessage,
    InformationalResponse,
    LocalProtocolError,
    RemoteProtocolError,
    Request,
    Response,
)

__all__ = ["Exchange", "Message"]

Message = MutableMapping[str, Any]


class Exchange:
    """One request and its response: the ASGI ``receive`` and ``send`` of one call."""

    def __init__(self, conn: Connection, request: Request, scheme: str) -> None:
        self.conn = conn
        self.request = request
        self.head = request.method == b"HEAD"
        #: the request said ``Expect: 100-continue`` (and no answer has gone out yet)
        self.expects_continue = conn.http.they_are_waiting_for_100_continue
        self.body_done = False
        self.body_bytes = 0
        #: the status the server answers with itself when the body could not be read
        #: (408 too slow, 413 too large, 400 malformed; 0: the client went away)
        self.failure: int | None = None
        self.started = False
        #: the response's head, held until its body comes: head, body and end of
        #: message then go out in one write. The protocol is given the status and the
        #: headers that frame the message (``head_event``) and the others, checked here,
        #: as lines (``head_lines``): see :func:`_response_head`.
        self.head_event: Response | None = None
        self.head_lines = b""
        self.complete = trio.Event()
        self.scheme = scheme

    # -- receive -------------------------------------------------------------------------

    async def receive(self) -> Message:
        if self.body_done or self.failure is not None:
            await self.complete.wait()
            return {"type": "http.disconnect"}
        conn = self.conn
        if self.expects_continue and not self.started:
            self.expects_continue = False
            if conn.http.they_are_waiting_for_100_continue:
                await conn.write(InformationalResponse(100))
        try:
            event = await conn.next_event(conn.limits.body_timeout)
        except ClientGone:
            return self._failed(0)
        except trio.TooSlowError:
            return self._failed(408)
        except RemoteProtocolError:
            return self._failed(400)
        if isinstance(event, Data):
            self.body_bytes += len(event.data)
            if self.body_bytes > conn.limits.max_body_bytes:
                return self._failed(413)
            return {"type": "http.request", "body": event.data, "more_body": True}
        if isinstance(event, EndOfMessage):
            self.body_done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return self._failed(0)

    def _failed(self, status: int) -> Message:
        self.failure = status
        self.conn.closing = True
        return {"type": "http.disconnect"}

    # -- send ----------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        kind = message["type"]
        conn = self.conn
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("response already started")
            # Started once its head is sound: a refused one leaves the 500 to the server.
            self.head_event, self.head_lines = _response_head(
                message["status"], message.get("headers", ()), conn
            )
            self.started = True
        elif kind == "http.response.body":
            if not self.started:
                raise RuntimeError("response body before its start")
            if self.complete.is_set():
                return
            events: list[Data | EndOfMessage] = []
            head = b""
            if self.head_event is not None:
                head = conn.http.send(self.head_event, self.head_lines)
                self.head_event = None
            body = message.get("body", b"")
            if body and not self.head:
                events.append(Data(bytes(body)))
            done = not message.get("more_body", False)
            if done:
                events.append(EndOfMessage())
            await conn.write(*events, head=head)
            if done:
                self.complete.set()

    @property
    def head_sent(self) -> bool:
        return self.started and self.head_event is None

    def scope(self, server: tuple[str, int] | None, client: tuple[str, int] | None) -> Message:
        request = self.request
        target = request.target
        path, _, query = target.partition(b"?")
        raw_path = path
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": request.http_version.decode(),
            "method": request.method.decode("ascii"),
            "scheme": self.scheme,
            "path": _unquote(raw_path),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": request.headers,
            "server": server,
            "client": client,
        }


#: The response headers the protocol acts on (the message's framing, keep-alive).
_FRAMING = frozenset((b"content-length", b"transfer-encoding", b"connection"))
_LINE_BYTES = VALUE_BYTES + b"\r\n"
#: The framing answers made (checked once), by status and framing headers.
_FRAMING_EVENTS: dict[tuple[int, tuple[tuple[bytes, bytes], ...]], Response] = {}
_FRAMING_EVENTS_KEPT = 1024


def _response_head(
    status: int, headers: Iterable[tuple[bytes, bytes]], conn: Connection
) -> tuple[Response, bytes]:
    """The response's head in two parts: a :class:`Response` with the status and the
    headers the protocol acts on (Content-Length, Transfer-Encoding, Connection: the
    body's framing and keep-alive follow from them), and the other header lines, ready to
    write after its status line. The lines are checked all at once (a check per header
    was an eighth of a jwks request's CPU in cProfile), and the framing events of the
    common answers are made once. A header the application made badly (CR or LF in a
    value, a name that is no token) raises :class:`LocalProtocolError`: nothing of the
    answer has been written, the server answers 500. Names are written lower-case."""
    framing: list[tuple[bytes, bytes]] = []
    names: list[bytes] = []
    lines: list[bytes] = []
    closes = False
    for raw_name, raw_value in headers:
        name, value = bytes(raw_name).lower(), bytes(raw_value)
        if name in _FRAMING:
            framing.append((name, value))
            closes = closes or name == b"connection"
        else:
            if value and (value[0] in BLANKS or value[-1] in BLANKS):
                raise LocalProtocolError("a response header value begins or ends blank")
            names.append(name)
            lines.append(b"%s: %s\r\n" % (name, value))
    if b"date" not in names:
        names.append(b"date")
        lines.append(b"date: %s\r\n" % conn.date.now())
    if conn.closing and not closes:
        framing.append((b"connection", b"close"))
    block = b"".join(lines)
    # Each line was made "name: value" CRLF: with no CR or LF in a name or a value (one
    # of each a line), every other byte one a value may hold and the names tokens, each
    # line is sound.
    count = len(lines)
    if (
        block.count(b"\n") != count
        or block.count(b"\r") != count
        or block.translate(None, _LINE_BYTES)
        or b"".join(names).translate(None, NAME_BYTES)
        or b"" in names
    ):
        raise LocalProtocolError("illegal header in the response")
    key = (status, tuple(framing))
    event = _FRAMING_EVENTS.get(key)
    if event is None:
        event = Response(status, framing, _PHRASES.get(status, b""))
        if len(_FRAMING_EVENTS) < _FRAMING_EVENTS_KEPT:
            _FRAMING_EVENTS[key] = event
    return event, block


#: The status line's reason phrases (clients ignore them; people reading a trace do not).
_PHRASES = {status.value: status.phrase.encode() for status in HTTPStatus}


def _unquote(raw: bytes) -> str:
    if b"%" in raw:
        raw = unquote_to_bytes(raw)
    return raw.decode("utf-8", "replace")
