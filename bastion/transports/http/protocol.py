"""The server's side of HTTP/1.1, without I/O: requests parsed by llhttp (through
httptools), responses framed here. The shape and the decisions are h11's, where bastion
relied on them: events (:class:`Request`, :class:`Data`, :class:`EndOfMessage`,
:class:`ConnectionClosed`, or :data:`NEED_DATA`), each side's state, keep-alive (HTTP/1.0
or ``Connection: close`` from either side closes; so does an error), one request per
cycle (a pipelined request waits for :meth:`ServerConnection.start_next_cycle`).

llhttp is strict: bare LF line ends, folded lines, Content-Length with Transfer-Encoding,
two Content-Lengths, bad names, values and targets, and methods it does not know (h11
took any token) are refused (400). What it leaves to its user is checked here: the
head's size (431), Host (one, and required on HTTP/1.1), a transfer coding other than
chunked (501), a body on an ``Upgrade`` request (llhttp would skip it: 400; without a
body the request is answered as any other), and the bytes a head or a body's framing
may take while incomplete (llhttp keeps no buffer, httptools joins a header's pieces).
"""

from __future__ import annotations

from collections import deque
from enum import Enum
from typing import NamedTuple

import httptools

__all__ = [
    "BLANKS",
    "NAME_BYTES",
    "NEED_DATA",
    "VALUE_BYTES",
    "ConnectionClosed",
    "Data",
    "EndOfMessage",
    "Event",
    "InformationalResponse",
    "LocalProtocolError",
    "RemoteProtocolError",
    "Request",
    "Response",
    "ServerConnection",
    "Signal",
    "State",
]


class ProtocolError(Exception):
    def __init__(self, message: str, error_status_hint: int = 400) -> None:
        super().__init__(message)
        self.error_status_hint = error_status_hint


class RemoteProtocolError(ProtocolError):
    """The client broke the protocol: answered with ``error_status_hint``, then closed."""


class LocalProtocolError(ProtocolError):
    """What the server was asked to send would break the protocol (nothing was sent)."""


class State(Enum):
    IDLE = "IDLE"
    SEND_RESPONSE = "SEND_RESPONSE"
    SEND_BODY = "SEND_BODY"
    DONE = "DONE"
    MUST_CLOSE = "MUST_CLOSE"
    CLOSED = "CLOSED"
    ERROR = "ERROR"


class Signal(Enum):
    NEED_DATA = "NEED_DATA"
    PAUSED = "PAUSED"


NEED_DATA = Signal.NEED_DATA
IDLE, SEND_RESPONSE, SEND_BODY = State.IDLE, State.SEND_RESPONSE, State.SEND_BODY
DONE, MUST_CLOSE, CLOSED, ERROR = State.DONE, State.MUST_CLOSE, State.CLOSED, State.ERROR

#: What RFC 9110 allows in a header name (a token), and in a value (visible characters,
#: spaces and tabs; never CR, LF or NUL).
NAME_BYTES = b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
VALUE_BYTES = bytes([9, *range(0x20, 0x7F), *range(0x80, 0x100)])
BLANKS = (0x20, 0x09)
#: The bytes of a request line besides its method and target, of a header line besides
#: its name and value, and of the head's end: the head's size as llhttp read it.
_LINE_EXTRA, _FIELD_EXTRA = len(b"  HTTP/1.1\r\n"), len(b": \r\n")
_CHUNKED, _UNTIL_CLOSE = -1, -2


class Request(NamedTuple):
    method: bytes
    target: bytes
    #: (lower-case name, value) pairs, in the client's order
    headers: list[tuple[bytes, bytes]]
    http_version: bytes
    keep_alive: bool
    expects_continue: bool


class Data(NamedTuple):
    data: bytes


class EndOfMessage(NamedTuple):
    pass


class ConnectionClosed(NamedTuple):
    pass


class InformationalResponse(NamedTuple):
    status_code: int
    reason: bytes = b"Continue"


class _Failed(NamedTuple):
    error: RemoteProtocolError


Event = Request | Data | EndOfMessage | ConnectionClosed
_END = EndOfMessage()


def check_field(name: bytes, value: bytes) -> None:
    """A response header as RFC 9110 allows it, or :class:`LocalProtocolError`."""
    if (
        not name
        or name.translate(None, NAME_BYTES)
        or value.translate(None, VALUE_BYTES)
        or (value and (value[0] in BLANKS or value[-1] in BLANKS))
    ):
        raise LocalProtocolError("illegal header in the response")


class Response:
    """A response's status and headers, checked once (the common ones are made once): the
    framing headers (Content-Length, Transfer-Encoding, Connection) are read, the others
    kept as lines to write."""

    __slots__ = ("connection", "length", "lines", "reason", "status_code")

    def __init__(
        self, status_code: int, headers: list[tuple[bytes, bytes]], reason: bytes = b""
    ) -> None:
        if not 200 <= status_code < 1000:
            raise LocalProtocolError(f"a final response's status is {status_code}")
        self.status_code, self.reason = status_code, reason
        lengths: set[bytes] = set()
        chunked = False
        self.connection: list[bytes] = []
        lines: list[bytes] = []
        for raw_name, value in headers:
            name = raw_name.lower()
            check_field(name, value)
            if name == b"content-length":
                if not value.isdigit():
                    raise LocalProtocolError("bad Content-Length in the response")
                lengths.add(value.lstrip(b"0") or b"0")
            elif name == b"transfer-encoding":
                if value.lower() != b"chunked":
                    raise LocalProtocolError("only Transfer-Encoding: chunked is supported")
                chunked = True
            elif name == b"connection":
                self.connection += [token for token in _tokens(value) if token]
            else:
                lines.append(b"%s: %s\r\n" % (name, value))
        if len(lengths) > 1:
            raise LocalProtocolError("two different Content-Lengths in the response")
        #: the body's length, None when unknown (chunked, or until the connection closes)
        self.length = int(lengths.pop()) if lengths and not chunked else None
        self.lines = b"".join(lines)


class ServerConnection:
    """One connection's HTTP/1.1 state, server side. ``max_head_bytes``: the most a request
    head may take (431 over it), and the most a body's framing (chunk lines, trailers) may
    take beyond the body."""

    def __init__(self, max_head_bytes: int) -> None:
        self.max_head_bytes = max_head_bytes
        self._parser = httptools.HttpRequestParser(self)
        #: parsed and not yet handed out, pipelined requests' included, a failure last
        self._events: deque[Event | _Failed] = deque()
        self._eof = self._broken = False
        # the message llhttp is reading: its number, open (begun, not complete), in its
        # head, and the bytes of the reads that began and ended inside it
        self._begun, self._open, self._in_head, self._raw = 0, False, False, 0
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body_seen = 0
        self._our, self._their = IDLE, IDLE
        self._keep_alive = True
        self._method: bytes | None = None
        self._their_version: bytes | None = None
        self._writer = 0
        #: the request said ``Expect: 100-continue`` and neither a response nor its body
        #: has come since
        self.they_are_waiting_for_100_continue = False

    # -- states --------------------------------------------------------------------------

    @property
    def our_state(self) -> State:
        if self._our is DONE and (not self._keep_alive or self._their in (ERROR, CLOSED)):
            return MUST_CLOSE
        return self._our

    @property
    def their_state(self) -> State:
        if self._their is DONE and not self._keep_alive:
            return MUST_CLOSE
        return self._their

    @property
    def head_begun(self) -> bool:
        """Something of the next request has arrived (or its parse failed)."""
        return bool(self._events) or self._open or self._their is not IDLE

    def start_next_cycle(self) -> None:
        """After a request and its response, both whole, on a kept connection."""
        if self.our_state is not DONE or self.their_state is not DONE:
            raise LocalProtocolError("the exchange is not over, or the connection closes")
        self._our = self._their = IDLE
        self._method = self._their_version = None
        self._keep_alive = True

    # -- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """What the client sent next; b"" is its end of sending."""
        if not data:
            self._eof = True
            return
        if self._broken:
            return
        reading = self._begun if self._open else -1
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            # The request is whole (a body was refused): the rest is another request.
            self._parser = httptools.HttpRequestParser(self)
            self.receive_data(data[upgrade.args[0] :])
            return
        except httptools.HttpParserError as exc:
            cause = exc.__context__
            if not isinstance(cause, RemoteProtocolError):
                cause = RemoteProtocolError(str(exc) or "malformed request")
            self._fail(cause)
            return
        if self._open and self._begun == reading:  # the whole read was inside one message
            self._raw += len(data)
            if self._in_head:
                if self._raw > self.max_head_bytes:
                    self._fail(RemoteProtocolError("request head too large", 431))
            elif self._raw - self._body_seen > self.max_head_bytes:
                self._fail(RemoteProtocolError("chunk framing or trailers too large"))

    def _fail(self, error: RemoteProtocolError) -> None:
        self._broken = True
        self._events.append(_Failed(error))

    def next_event(self) -> Event | Signal:
        """The next event of the current request, :data:`NEED_DATA`, or ``PAUSED`` once
        the request is whole (until :meth:`start_next_cycle`)."""
        their = self._their
        if their is ERROR:
            raise RemoteProtocolError("the request already failed")
        if their is not IDLE and their is not SEND_BODY:
            return Signal.PAUSED
        if self._events:
            event = self._events.popleft()
            if isinstance(event, Request):
                self._their, self._our = SEND_BODY, SEND_RESPONSE
                self._method, self._their_version = event.method, event.http_version
                self._keep_alive = event.keep_alive
                self.they_are_waiting_for_100_continue = event.expects_continue
                return event
            if isinstance(event, _Failed):
                self._their = ERROR
                raise event.error
            self.they_are_waiting_for_100_continue = False
            if event is _END:
                self._their = DONE
            return event
        if self._eof:
            if self._open or their is SEND_BODY:
                self._their = ERROR
                raise RemoteProtocolError("the client closed within a request")
            self._their = CLOSED
            return ConnectionClosed()
        return NEED_DATA

    # llhttp's callbacks (through httptools)

    def on_message_begin(self) -> None:
        self._begun += 1
        self._open = self._in_head = True
        self._raw = self._body_seen = 0
        self._url, self._headers = b"", []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:  # not trailers: those are read and dropped
            self._headers.append((name.lower(), value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser, headers = self._parser, self._headers
        method, version = parser.get_method(), parser.get_http_version().encode()
        size = len(method) + len(self._url) + _LINE_EXTRA + 2
        hosts, keep_alive, expects, body = 0, version >= b"1.1", False, False
        for name, value in headers:
            size += len(name) + len(value) + _FIELD_EXTRA
            if name == b"host":
                hosts += 1
            elif name == b"connection":
                keep_alive = keep_alive and b"close" not in _tokens(value)
            elif name == b"transfer-encoding":
                if value.lower() != b"chunked":
                    raise RemoteProtocolError("only Transfer-Encoding: chunked", 501)
                body = True
            elif name == b"content-length":
                body = body or value.strip(b"0") != b""
            elif name == b"expect":
                expects = value.lower() == b"100-continue" and version >= b"1.1"
        if size > self.max_head_bytes:
            raise RemoteProtocolError("request head too large", 431)
        if hosts > 1 or (hosts == 0 and version == b"1.1"):
            raise RemoteProtocolError("a request needs one Host header")
        if body and parser.should_upgrade():
            raise RemoteProtocolError("a body after an upgrade or CONNECT request")
        self._events.append(Request(method, self._url, headers, version, keep_alive, expects))

    def on_body(self, body: bytes) -> None:
        self._body_seen += len(body)
        self._events.append(Data(body))

    def on_message_complete(self) -> None:
        self._open = False
        self._events.append(_END)

    # -- sending -------------------------------------------------------------------------

    def send(
        self,
        event: Response | InformationalResponse | Data | EndOfMessage,
        lines: bytes = b"",
    ) -> bytes:
        """The bytes of ``event`` (``lines``: more header lines of a :class:`Response`,
        already checked); :class:`LocalProtocolError` when it does not fit the state."""
        try:
            if isinstance(event, Data):
                return self._body(event.data)
            if isinstance(event, EndOfMessage):
                return self._end()
            if isinstance(event, Response):
                return self._head(event, lines)
            return self._interim(event)
        except LocalProtocolError:
            self._our = ERROR
            raise

    def _interim(self, event: InformationalResponse) -> bytes:
        if self._our is not SEND_RESPONSE or not 100 <= event.status_code < 200:
            raise LocalProtocolError("no interim response now")
        self.they_are_waiting_for_100_continue = False
        return b"HTTP/1.1 %d %s\r\n\r\n" % (event.status_code, event.reason)

    def _head(self, response: Response, lines: bytes) -> bytes:
        if self._our is not IDLE and self._our is not SEND_RESPONSE:
            raise LocalProtocolError("no response now")
        status, length = response.status_code, response.length
        bodiless = status in (204, 304) or self._method == b"HEAD"
        framing = b""
        if status in (204, 304):
            framing = b"" if length is None else b"content-length: %d\r\n" % length
            self._writer = 0
        elif length is not None:
            framing = b"content-length: %d\r\n" % length
            self._writer = 0 if bodiless else length
        elif self._their_version is not None and self._their_version >= b"1.1":
            framing = b"transfer-encoding: chunked\r\n"
            self._writer = 0 if bodiless else _CHUNKED
        else:  # an HTTP/1.0 client (or none yet): the body ends with the connection
            self._writer = 0 if bodiless else _UNTIL_CLOSE
            self._keep_alive = self._keep_alive and bodiless
        tokens = response.connection
        if not self._keep_alive or b"close" in tokens:
            self._keep_alive = False
            tokens = sorted({*tokens, b"close"} - {b"keep-alive"})
        if tokens:
            framing += b"connection: %s\r\n" % b", ".join(tokens)
        self._our = SEND_BODY
        self.they_are_waiting_for_100_continue = False
        return b"HTTP/1.1 %d %s\r\n%s%s%s\r\n" % (
            status,
            response.reason,
            lines,
            response.lines,
            framing,
        )

    def _body(self, data: bytes) -> bytes:
        if self._our is not SEND_BODY:
            raise LocalProtocolError("no body now")
        left = self._writer
        if left >= 0:
            if len(data) > left:
                raise LocalProtocolError("more body than the response declared")
            self._writer = left - len(data)
            return data
        if left == _CHUNKED:
            return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
        return data

    def _end(self) -> bytes:
        if self._our is not SEND_BODY:
            raise LocalProtocolError("no end of a body now")
        if self._writer > 0:
            raise LocalProtocolError("less body than the response declared")
        self._our = DONE
        return b"0\r\n\r\n" if self._writer == _CHUNKED else b""


def _tokens(value: bytes) -> list[bytes]:
    return [token.strip().lower() for token in value.split(b",")]
