"""bastion's own HTTP/1.1 server: llhttp (:mod:`transports.http.protocol`) for the
protocol, trio for the I/O, hosting an ASGI application (the same one hypercorn can host,
``--http-server hypercorn``).

One request at a time per connection; pipelined requests wait, parsed, and are answered
in order. Every wait has a limit: the request head (``header_timeout``), each
piece of a body (``body_timeout``), an idle keep-alive connection (``keep_alive_timeout``).
Heads over ``max_header_bytes`` get 431, bodies over ``max_body_bytes`` 413, anything
malformed (two Content-Lengths, Content-Length with Transfer-Encoding, obs-fold, bare
LF line ends, no Host) 400; each of those closes the connection. At most ``max_connections``
connections are served at once; more wait in the listen backlog.

Stopping (:meth:`HttpServer.serve`'s ``stop``) is graceful, all within ``shutdown_timeout``:
the listeners close, but the connections already in their listen backlog are accepted
first (closing a listener resets them) and served; from then on (or ``stop_settle`` later,
where other processes share the listening socket) every response not yet begun says
``Connection: close``; requests in flight finish; an idle keep-alive connection
waits :data:`STOP_GRACE` more for a request already on its way, then closes.

With an ``ssl.SSLContext`` every connection is TLS (``trio.SSLStream``): the handshake
has the request head's time limit, and the application sees the ``https`` scheme.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from bastion.core.networks import authority
from bastion.core.settings import Settings
from bastion.transports.http.balance import WorkerShare
from bastion.transports.http.connection import (
    REASONS,
    ClientGone,
    Connection,
    HttpDate,
    ServerLimits,
)
from bastion.transports.http.exchange import Exchange, Message
from bastion.transports.http.protocol import (
    DONE,
    SEND_BODY,
    Data,
    EndOfMessage,
    RemoteProtocolError,
    Request,
)

__all__ = ["ASGIApp", "HttpServer", "ServerLimits", "open_listeners"]

log = logging.getLogger("bastion.http.server")

#: How long, during a stop, an idle keep-alive connection still waits for a request (one
#: its client sent before it could know of the stop), at most ``shutdown_timeout``.
STOP_GRACE = 1.0

ASGIApp = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]


def _address(sockname: Any) -> tuple[str, int] | None:
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return str(sockname[0]), int(sockname[1])
    return None


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """HTTPS on the public listeners when ``--tls-cert-file`` is given: TLS 1.2 or later,
    HTTP/1.1."""
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    context.set_alpn_protocols(["http/1.1"])
    return context


class HttpServer:
    """Serve ``app`` on trio socket listeners until ``stop`` is set."""

    def __init__(
        self,
        app: ASGIApp,
        limits: ServerLimits | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        share: WorkerShare | None = None,
    ) -> None:
        """``share``: this worker's slot when ``--workers`` processes share the listener."""
        self.app = app
        self.share = share
        #: connections accepted and not yet closed (what ``share`` publishes)
        self._held = 0
        self.limits = limits or ServerLimits()
        self.tls = tls
        self._scheme = "https" if tls is not None else "http"
        self._date = HttpDate()
        self._slots = trio.Semaphore(self.limits.max_connections)
        self._connections: set[Connection] = set()
        self._stopping = False

    async def serve(
        self,
        listeners: list[trio.SocketListener],
        stop: trio.Event,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until ``stop``; reports ``http(s)://host:port`` of the first listener."""
        async with trio.open_nursery() as lifespan:
            shutdown = trio.Event()
            await lifespan.start(self._lifespan, shutdown)
            async with trio.open_nursery() as connections:
                async with trio.open_nursery() as accepting:
                    self._hold(0)
                    for listener in listeners:
                        accepting.start_soon(self._accept, listener, connections)
                    task_status.started(bound_address(listeners, self._scheme))
                    await stop.wait()
                    accepting.cancel_scope.cancel()
                if self.share is not None:
                    self.share.leave()
                    self.share = None
                self._drain(listeners, connections)
            shutdown.set()

    async def _lifespan(
        self, shutdown: trio.Event, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """ASGI lifespan: startup before the first request, shutdown after the last. An
        application without lifespan support (it raises) is served all the same."""
        started = trio.Event()
        sent = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

        async def receive() -> Message:
            if len(sent) == 1:
                await shutdown.wait()
            return sent.pop(0)

        async def send(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                raise RuntimeError(f"application start-up failed: {message.get('message', '')}")
            if message["type"] == "lifespan.startup.complete":
                started.set()

        async def run() -> None:
            try:
                await self.app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
            except RuntimeError:
                raise
            except Exception:
                log.debug("the application does not support the lifespan protocol")
            started.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await started.wait()
            task_status.started()

    def _drain(self, listeners: list[trio.SocketListener], connections: trio.Nursery) -> None:
        """The stop, in one step (no checkpoint: no client can be told to close and then
        find a listener open): the listeners' backlogs are taken to be served and the
        listeners closed; every answer not yet begun says ``Connection: close``; idle
        connections wait the grace; ``connections`` (it waits for them all) ends by the
        timeout."""
        for listener in listeners:
            for stream in _backlog(listener):
                connections.start_soon(self._connection, stream, False)
            listener.socket.close()
        connections.cancel_scope.deadline = trio.current_time() + self.limits.shutdown_timeout
        if self.limits.stop_settle > 0:
            connections.start_soon(self._close_after_settle)
        else:
            self._close_connections()

    async def _close_after_settle(self) -> None:
        await trio.sleep(self.limits.stop_settle)
        self._close_connections()

    def _close_connections(self) -> None:
        """From now on every answer says ``Connection: close``; idle connections wait only
        the grace."""
        self._stopping = True
        for conn in self._connections:
            conn.closing = True
            conn.stop_waiting(self._grace())

    def _grace(self) -> float:
        return min(STOP_GRACE, self.limits.shutdown_timeout)

    async def _accept(self, listener: trio.SocketListener, connections: trio.Nursery) -> None:
        while True:
            await self._slots.acquire()
            try:
                if self.share is not None:
                    await self.share.take_turn()
                stream = await listener.accept()
            except BaseException:
                self._slots.release()
                raise
            self._hold(1)
            connections.start_soon(self._connection, stream, True)

    def _hold(self, change: int) -> None:
        self._held += change
        if self.share is not None:
            self.share.publish(self._held)

    async def _connection(self, stream: trio.SocketStream, holds_slot: bool) -> None:
        """``holds_slot``: false for a connection taken from the backlog at a stop, served
        over ``max_connections`` (waiting for a slot, it could outlast the stop)."""
        wire: trio.abc.Stream = stream
        if self.tls is not None:
            wire = trio.SSLStream(stream, self.tls, server_side=True, https_compatible=True)
        conn = Connection(wire, self.limits, self._date, closing=self._stopping)
        if self._stopping:
            conn.stop_waiting(self._grace())
        self._connections.add(conn)
        try:
            sock = stream.socket
            server, client = _address(sock.getsockname()), _address(sock.getpeername())
            if isinstance(wire, trio.SSLStream):
                with trio.fail_after(self.limits.header_timeout):
                    await wire.do_handshake()
            await self._serve_connection(conn, server, client)
        except (ClientGone, OSError, trio.BrokenResourceError, trio.TooSlowError):
            pass
        finally:
            self._connections.discard(conn)
            if holds_slot:
                self._slots.release()
                self._hold(-1)
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await wire.aclose()

    async def _serve_connection(
        self, conn: Connection, server: tuple[str, int] | None, client: tuple[str, int] | None
    ) -> None:
        while True:
            try:
                event = await conn.next_head()
            except trio.TooSlowError:
                if conn.http.head_begun:  # a head begun and not finished; idle just closes
                    await conn.simple(408, "Request Timeout")
                return
            except RemoteProtocolError as exc:
                status = exc.error_status_hint
                await conn.simple(status, REASONS.get(status, "Bad Request"))
                return
            if not isinstance(event, Request):  # the client closed
                return
            exchange = Exchange(conn, event, self._scheme)
            await self._run_app(exchange, server, client)
            if not await self._finish(conn, exchange):
                if conn.http.our_state is DONE and conn.http.their_state is not DONE:
                    await conn.linger_close()
                return

    async def _run_app(
        self, exchange: Exchange, server: tuple[str, int] | None, client: tuple[str, int] | None
    ) -> None:
        conn = exchange.conn
        try:
            await self.app(exchange.scope(server, client), exchange.receive, exchange.send)
        except ClientGone:
            raise
        except Exception:
            log.exception("the application failed", extra={"path": exchange.request.target})
            exchange.failure = exchange.failure or 500
        if exchange.complete.is_set():
            return
        conn.closing = True
        if not exchange.head_sent and exchange.failure != 0:
            status = exchange.failure or 500
            await conn.simple(status, REASONS.get(status, "Internal Server Error"))

    async def _finish(self, conn: Connection, exchange: Exchange) -> bool:
        """Ready the connection for its next request; False when it must close. An answer
        that went out keep-alive though a stop began meanwhile keeps the connection for the
        stop's grace: closing it at once would reset the client's next request."""
        http = conn.http
        if http.our_state is not DONE:
            return False
        if conn.closing and (exchange.failure is not None or not self._stopping):
            return False
        if exchange.expects_continue and http.their_state is SEND_BODY:
            return False  # answered before the client was told to send its body
        # Discard what the application left of the body, within the limits.
        while http.their_state is SEND_BODY:
            try:
                event = await conn.next_event(conn.limits.body_timeout)
            except (trio.TooSlowError, RemoteProtocolError):
                return False
            if isinstance(event, Data):
                exchange.body_bytes += len(event.data)
                if exchange.body_bytes > conn.limits.max_body_bytes:
                    return False
            elif not isinstance(event, EndOfMessage):
                return False
        if http.their_state is not DONE:
            return False
        http.start_next_cycle()
        return True


def _backlog(listener: trio.SocketListener) -> list[trio.SocketStream]:
    """The connections the kernel has completed on ``listener`` and the server not yet
    accepted, taken without waiting (through a non-blocking duplicate of its socket)."""
    streams: list[trio.SocketStream] = []
    sock = listener.socket
    with socket.fromfd(sock.fileno(), sock.family, sock.type, sock.proto) as duplicate:
        duplicate.setblocking(False)
        while True:
            try:
                accepted, _ = duplicate.accept()
            except ConnectionAbortedError:
                continue  # its client gave up meanwhile
            except OSError:  # BlockingIOError: none left (or no descriptors left)
                return streams
            streams.append(trio.SocketStream(trio.socket.from_stdlib_socket(accepted)))


async def open_listeners(host: str, port: int, backlog: int = 1024) -> list[trio.SocketListener]:
    """Bound, listening sockets for ``host:port`` (``port`` 0: any free port)."""
    listeners = await trio.open_tcp_listeners(port, host=host or None, backlog=backlog)
    return listeners


def bound_address(listeners: list[trio.SocketListener], scheme: str = "http") -> str:
    """``http(s)://host:port`` of the first listener (the port a 0 resolved to)."""
    host, port = listeners[0].socket.getsockname()[:2]
    return f"{scheme}://{authority(host, port)}"
