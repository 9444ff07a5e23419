"""One HTTP/2 connection of the gRPC listener: sans-IO ``h2`` in the worker's trio loop.

The connection's task reads frames and feeds them to ``h2``; every call (stream) runs in
a task of its own, inside a cancel scope whose deadline is the call's ``grpc-timeout``
(for a unary call, ``--request-timeout`` when that is sooner, then held by the call's
transactions as an HTTP request's is: ``storage/deadline.py``), and which a client's
RST_STREAM, or the connection's end, cancels: a call that ends early never leaves a
database query running behind it. A unary call's task starts when its request has
arrived whole; a streaming call's (health Watch, reflection) when its headers have. One
writer task sends what ``h2`` has to send, so calls answered together share a write.
Replies larger than the peer's flow-control window wait for its WINDOW_UPDATEs.

What gRPC over HTTP/2 asks and this answers: a wrong content-type is HTTP 415; an unknown
path UNIMPLEMENTED; ``grpc-encoding`` other than identity UNIMPLEMENTED (no compression is
offered); a compressed flag without an encoding INTERNAL; a message over 4 MiB
RESOURCE_EXHAUSTED; ``grpc-message`` percent-encoded; ``-bin`` metadata base64.

A stop (:meth:`Connection.drain`) sends GOAWAY naming the last stream taken: calls
already in flight finish, later streams are refused (REFUSED_STREAM, which clients retry
elsewhere), and the connection closes when its last call has answered. ``h2`` closes its
state machine on any GOAWAY it sends, so the first one is written as a raw frame and
``h2``'s own only at the end.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import dataclass, field

import trio
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import H2Error
from h2.settings import SettingCodes, Settings
from hyperframe.frame import GoAwayFrame

from bastion.storage.deadline import Ledger, overrun
from bastion.transports.grpc.calls import Abort, Call, Counted, Metadata, Method, Status
from bastion.transports.grpc.framing import (
    PREFIX,
    REPLY_HEADERS,
    Request,
    encoded,
    parse_timeout,
    status_headers,
)
from bastion.transports.grpc.hpack_memo import remembering

log = logging.getLogger("bastion.grpc")

#: grpcio's default limit on a received message, kept.
MAX_RECEIVE = 4 * 1024 * 1024
#: Requests a streaming call may have waiting unread before the stream is reset.
MAX_QUEUED = 64
#: Streams a client may open at once on a connection: far above the calls a process
#: takes (past those, a call is answered RESOURCE_EXHAUSTED, not refused by HTTP/2).
MAX_STREAMS = 1000
_READ = 65536
_CONFIG = H2Configuration(
    client_side=False,
    header_encoding=None,
    validate_outbound_headers=False,
    normalize_outbound_headers=False,
    validate_inbound_headers=False,
    normalize_inbound_headers=False,
)
#: A call whose own deadline comes first keeps no ledger: that deadline is the client's.
_NO_LEDGER = nullcontext()
_UNDECODABLE = "the request is not a valid protobuf message for this method"
_NOT_ONE_MESSAGE = "the request is not one whole message"


@dataclass(slots=True)
class Dispatch:
    """The listener's state every connection shares: the method table by path, the
    unary methods' metrics, and the calls in flight in this process."""

    methods: dict[bytes, Method]
    counted: dict[bytes, Counted]
    limit: int
    #: ``--request-timeout``: a unary call's deadline unless its own comes sooner.
    request_timeout: float = math.inf
    in_flight: int = 0
    #: Stopping: a connection opened now is drained at once.
    draining: bool = False
    connections: set[Connection] = field(default_factory=set)


class _Stream:
    __slots__ = ("body", "call", "deadline", "id", "method", "path", "requests", "reset",
                 "scope", "started")  # fmt: skip

    def __init__(self, sid: int, path: bytes, method: Method, call: Call, deadline: float) -> None:
        self.id = sid
        self.path = path
        self.method = method
        self.call = call
        self.deadline = deadline
        self.body = bytearray()
        self.requests: trio.MemorySendChannel[bytes] | None = None
        self.scope: trio.CancelScope | None = None
        self.started = False
        self.reset = False


class Connection:
    """Serves one client connection; :meth:`serve` returns when it has closed."""

    def __init__(self, stream: trio.abc.Stream, dispatch: Dispatch, peer: str) -> None:
        self._sock = stream
        self._dispatch = dispatch
        self._peer = peer
        self._h2 = remembering(H2Connection(config=_CONFIG))
        self._h2.local_settings = Settings(
            client=False, initial_values={SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS}
        )
        self._streams: dict[int, _Stream] = {}
        self._out: list[bytes] = []
        #: the plain TCP socket's descriptor, written at once when it has room (None: TLS)
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None
        #: the writer task is sending what it took from ``_out``
        self._writing = False
        self._wake = trio.Event()
        self._window = trio.Event()
        self._last_stream = 0
        self._draining = False
        self._close_when_sent = False
        self._nursery: trio.Nursery | None = None

    async def serve(self) -> None:
        self._dispatch.connections.add(self)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._h2.initiate_connection()
                self._send_soon()
                nursery.start_soon(self._writer)
                if self._dispatch.draining:
                    self.drain()
                await self._reader()
                # The peer went away (or broke the protocol): its calls end with it.
                nursery.cancel_scope.cancel()
        finally:
            self._dispatch.connections.discard(self)
            with trio.CancelScope(shield=True, deadline=trio.current_time() + 1):
                await self._sock.aclose()

    def drain(self) -> None:
        """Take no new call; close once the calls in flight have answered."""
        if self._draining:
            return
        self._draining = True
        self._send_soon()
        self._out.append(GoAwayFrame(0, last_stream_id=self._last_stream).serialize())
        self._wake.set()
        if not self._streams:
            self._close()

    # -- reading ---------------------------------------------------------------------

    async def _receive(self) -> bytes:
        """What the client sent next (b"": it is gone). A plain socket holding data is read
        at once, as the HTTP server reads: one checkpoint, not trio's socket layers."""
        fd = self._fd
        if fd is None:
            try:
                return bytes(await self._sock.receive_some(_READ))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return b""
        waited = False
        while True:
            try:
                data = os.read(fd, _READ)
            except BlockingIOError:
                waited = True
                try:
                    await trio.lowlevel.wait_readable(fd)
                except trio.ClosedResourceError:
                    return b""
                continue
            except OSError:  # reset
                return b""
            if not waited:
                await trio.lowlevel.checkpoint()  # let the calls it started run
            return data

    async def _reader(self) -> None:
        h2 = self._h2
        while True:
            data = await self._receive()
            if not data:
                return
            try:
                events = h2.receive_data(data)
            except H2Error:
                self._close(ErrorCodes.PROTOCOL_ERROR)
                return
            for event in events:
                if isinstance(event, RequestReceived):
                    self._on_request(event)
                elif isinstance(event, DataReceived):
                    self._on_data(event)
                elif isinstance(event, StreamEnded):
                    self._on_end(event.stream_id)
                elif isinstance(event, StreamReset):
                    self._on_reset(event.stream_id)
                elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
                    self._window.set()
                    self._window = trio.Event()
                elif isinstance(event, ConnectionTerminated):
                    return
            self._send_soon()

    def _on_request(self, event: RequestReceived) -> None:
        sid = event.stream_id
        if self._draining:
            self._h2.reset_stream(sid, ErrorCodes.REFUSED_STREAM)
            return
        self._last_stream = sid
        asked = Request.read(event.headers or ())
        if asked.verb != b"POST":
            self._h2.send_headers(sid, [(b":status", b"405")], end_stream=True)
            return
        if not asked.kind.startswith(b"application/grpc"):
            self._h2.send_headers(sid, [(b":status", b"415")], end_stream=True)
            return
        method = self._dispatch.methods.get(asked.path)
        if method is None:
            self._answer(sid, Status.UNIMPLEMENTED, "Method not found!")
            return
        if (encoding := asked.encoding) and encoding != b"identity":
            self._answer(
                sid,
                Status.UNIMPLEMENTED,
                f"grpc-encoding {encoding.decode('latin-1')} is not supported",
                [(b"grpc-accept-encoding", b"identity")],
            )
            return
        seconds = parse_timeout(asked.timeout) if asked.timeout else math.inf
        if seconds is None:
            self._answer(sid, Status.INTERNAL, "malformed grpc-timeout")
            return
        dispatch = self._dispatch
        if dispatch.in_flight >= dispatch.limit:
            self._answer(sid, Status.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!")
            return
        dispatch.in_flight += 1
        deadline = trio.current_time() + seconds
        stream = _Stream(sid, asked.path, method, Call(asked.metadata, self._peer), deadline)
        self._streams[sid] = stream
        if method.streaming is not None:
            send, receive = trio.open_memory_channel[bytes](math.inf)
            stream.requests = send
            stream.started = True
            self._spawn(self._streaming, stream, receive)
        if event.stream_ended:
            self._on_end(sid)

    def _on_data(self, event: DataReceived) -> None:
        sid = event.stream_id
        if event.flow_controlled_length:
            self._h2.acknowledge_received_data(event.flow_controlled_length, sid)
        stream = self._streams.get(sid)
        if stream is None or not event.data:
            return
        body = stream.body
        body += event.data
        if stream.requests is None:  # unary: one message, whole at the stream's end
            if len(body) >= 5:
                flags, length = PREFIX.unpack_from(body)
                if self._acceptable(stream, flags, length) and len(body) > 5 + length:
                    # More than its one message: answered now, not buffered to the end.
                    self._refuse(stream, Status.INTERNAL, _NOT_ONE_MESSAGE)
            return
        while len(body) >= 5:
            flags, length = PREFIX.unpack_from(body)
            if not self._acceptable(stream, flags, length) or len(body) < 5 + length:
                return
            stream.requests.send_nowait(bytes(body[5 : 5 + length]))
            del body[: 5 + length]
        if stream.requests.statistics().current_buffer_used > MAX_QUEUED:
            self._h2.reset_stream(sid, ErrorCodes.ENHANCE_YOUR_CALM)
            self._on_reset(sid)

    def _acceptable(self, stream: _Stream, flags: int, length: int) -> bool:
        """Whether a message's prefix is one this server reads; if not, the call is answered."""
        if length > MAX_RECEIVE:
            why = f"Received message larger than max ({length} vs. {MAX_RECEIVE})"
            self._refuse(stream, Status.RESOURCE_EXHAUSTED, why)
            return False
        if flags & 1:
            self._refuse(stream, Status.INTERNAL, "a compressed message without grpc-encoding")
            return False
        return True

    def _on_end(self, sid: int) -> None:
        stream = self._streams.get(sid)
        if stream is None:
            return
        if stream.requests is not None:
            stream.requests.close()
            return
        body = stream.body
        if len(body) < 5:
            self._refuse(stream, Status.INTERNAL, "the request has no message")
            return
        length = PREFIX.unpack_from(body)[1]
        if len(body) != 5 + length:
            self._refuse(stream, Status.INTERNAL, _NOT_ONE_MESSAGE)
            return
        stream.started = True
        self._spawn(self._unary, stream, bytes(memoryview(body)[5:]))

    def _on_reset(self, sid: int) -> None:
        stream = self._streams.get(sid)
        if stream is None:
            return
        stream.reset = True
        if stream.scope is not None:
            stream.scope.cancel()
        elif not stream.started:
            self._finished(stream)

    # -- calls -----------------------------------------------------------------------

    def _spawn(self, work: Callable[..., Awaitable[None]], *args: object) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(work, *args)

    def _refuse(self, stream: _Stream, status: Status, message: str) -> None:
        """Answers a call its handler has not seen (or must stop seeing) and forgets it."""
        if stream.scope is not None:
            stream.scope.cancel()
        stream.reset = True  # whatever the task still does, it sends nothing
        self._answer(stream.id, status, message)
        if not stream.started:
            self._finished(stream)

    def _finished(self, stream: _Stream) -> None:
        if self._streams.pop(stream.id, None) is None:
            return
        self._dispatch.in_flight -= 1
        if self._draining and not self._streams:
            self._close()

    async def _unary(self, stream: _Stream, payload: bytes) -> None:
        method = stream.method
        assert method.unary is not None
        counted = self._dispatch.counted[stream.path]
        started = time.perf_counter()
        status, message, reply = Status.OK, "", None
        trailers: Metadata = ()
        own = stream.deadline
        timeout = self._dispatch.request_timeout
        limit = trio.current_time() + timeout
        try:
            # --request-timeout as over HTTP, when the call's own deadline is later: past
            # it UNAVAILABLE, with nothing written (storage/deadline.py).
            with (
                trio.CancelScope(deadline=min(own, limit)) as scope,
                Ledger(scope, limit, held=own) if limit < own else _NO_LEDGER,
            ):
                stream.scope = scope
                try:
                    try:
                        request = method.decode(payload)
                    except Exception as exc:  # protobuf raises DecodeError, and others
                        log.warning(
                            "undecodable gRPC request to %s: %s",
                            stream.path.decode(),
                            str(exc) or type(exc).__name__,
                        )
                        raise Abort(Status.INVALID_ARGUMENT, _UNDECODABLE) from None
                    reply = (await method.unary(request, stream.call)).SerializeToString()
                except Abort as abort:
                    status, message, trailers = abort.status, abort.message, abort.trailers
                except Exception:
                    log.exception("unhandled error", extra={"method": stream.path.decode()})
                    status, message = Status.INTERNAL, "internal server error"
            if scope.cancelled_caught:
                if stream.reset:
                    status, message = Status.CANCELLED, ""
                elif limit < own and trio.current_time() < own:
                    status, message = Status.UNAVAILABLE, overrun(timeout).message
                else:
                    status, message = Status.DEADLINE_EXCEEDED, "deadline exceeded"
            counted.observe(status, started)
            if stream.reset:
                return
            initial = stream.call.initial_metadata
            if reply is None:
                self._answer(stream.id, status, message, encoded(initial + trailers))
                return
            h2, sid = self._h2, stream.id
            headers = REPLY_HEADERS + encoded(initial)
            framed = PREFIX.pack(0, len(reply)) + reply
            end = status_headers(status, message) + encoded(trailers)
            if len(framed) <= min(h2.local_flow_control_window(sid), h2.max_outbound_frame_size):
                # The usual reply: headers, message and trailers in one frame each, one
                # write, nothing to wait for (so no cancel scope either).
                h2.send_headers(sid, headers)
                h2.send_data(sid, framed)
                h2.send_headers(sid, end, end_stream=True)
            else:
                with trio.CancelScope() as sending:  # a reset while waiting for window ends it
                    stream.scope = sending
                    h2.send_headers(sid, headers)
                    await self._send_framed(sid, framed)
                    h2.send_headers(sid, end, end_stream=True)
            self._send_soon()
        except H2Error:
            pass  # the client reset the stream, or closed the connection, meanwhile
        finally:
            self._finished(stream)

    async def _streaming(self, stream: _Stream, receive: trio.MemoryReceiveChannel[bytes]) -> None:
        method = stream.method
        assert method.streaming is not None
        status, message = Status.OK, ""
        trailers: Metadata = ()
        sent_headers = False
        try:
            with trio.CancelScope(deadline=stream.deadline) as scope:
                stream.scope = scope
                try:
                    replies = method.streaming(_requests(method, receive), stream.call)
                    async with aclosing(replies):  # type: ignore[type-var]
                        async for reply in replies:
                            if not sent_headers:
                                headers = REPLY_HEADERS + encoded(stream.call.initial_metadata)
                                self._h2.send_headers(stream.id, headers)
                                sent_headers = True
                            await self._send_message(stream.id, reply.SerializeToString())
                except Abort as abort:
                    status, message, trailers = abort.status, abort.message, abort.trailers
                except Exception:
                    log.exception("unhandled error", extra={"method": stream.path.decode()})
                    status, message = Status.INTERNAL, "internal server error"
            if stream.reset:
                return
            if scope.cancelled_caught:
                status, message = Status.DEADLINE_EXCEEDED, "deadline exceeded"
            if sent_headers:
                end = status_headers(status, message) + encoded(trailers)
                self._h2.send_headers(stream.id, end, end_stream=True)
                self._send_soon()
            else:
                self._answer(stream.id, status, message, encoded(trailers))
        except H2Error:
            pass
        finally:
            self._finished(stream)

    # -- writing ---------------------------------------------------------------------

    def _answer(
        self, sid: int, status: Status, message: str, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        """A Trailers-Only reply: one HEADERS frame that ends the stream."""
        try:
            headers = [*REPLY_HEADERS, *status_headers(status, message), *extra]
            self._h2.send_headers(sid, headers, end_stream=True)
        except H2Error:
            return  # the stream is gone already
        self._send_soon()

    async def _send_message(self, sid: int, data: bytes) -> None:
        """``data`` as one length-prefixed message, as the peer's windows allow."""
        await self._send_framed(sid, PREFIX.pack(0, len(data)) + data)
        self._send_soon()

    async def _send_framed(self, sid: int, framed: bytes) -> None:
        """A framed message handed to h2 as the peer's windows allow (what is ready is
        sent while it waits; the rest is left for the caller to send)."""
        h2 = self._h2
        offset, size = 0, len(framed)
        while offset < size:
            room = min(h2.local_flow_control_window(sid), h2.max_outbound_frame_size)
            if room <= 0:
                self._send_soon()
                await self._window.wait()
                continue
            h2.send_data(sid, framed[offset : offset + room])
            offset += room

    def _send_soon(self) -> None:
        """Send what h2 has to send: straight to a plain socket with room when nothing is
        queued before it (no trip through the writer task, as the HTTP server writes),
        else through the writer, which keeps the order and waits for room."""
        data = self._h2.data_to_send()
        if not data:
            return
        if self._fd is not None and not self._out and not self._writing:
            try:
                sent = os.write(self._fd, data)
            except OSError:  # no room (BlockingIOError), or gone: the writer finds out
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self._out.append(data)
        self._wake.set()

    def _close(self, error: ErrorCodes = ErrorCodes.NO_ERROR) -> None:
        """Final GOAWAY; the writer closes the connection once it has sent everything."""
        if self._close_when_sent:
            return
        self._h2.close_connection(error, last_stream_id=self._last_stream)
        self._close_when_sent = True
        self._send_soon()
        self._wake.set()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self._out:
                data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
                self._out.clear()
                self._writing = True
                try:
                    await self._sock.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._close_when_sent = True
                finally:
                    self._writing = False
            if self._close_when_sent and not self._out:
                assert self._nursery is not None
                self._nursery.cancel_scope.cancel()
                return


async def _requests(
    method: Method, receive: trio.MemoryReceiveChannel[bytes]
) -> AsyncIterator[object]:
    async for payload in receive:
        try:
            yield method.decode(payload)
        except Exception:
            raise Abort(Status.INVALID_ARGUMENT, _UNDECODABLE) from None
