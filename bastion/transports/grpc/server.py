"""The gRPC listener on ``--host:--grpc-port``: HTTP/2 (``h2``) in the process's trio loop.

Calls run as trio tasks beside the HTTP server's, with no thread and no hop between
loops (:mod:`transports.grpc.connection` serves each connection). At most
:data:`MAX_CONCURRENT_RPCS` calls are in flight in a process: one more is answered
RESOURCE_EXHAUSTED at once instead of queueing past its deadline. The port is bound at
construction, so a taken port fails start-up before anything serves; ``share_port``
(``--workers``) binds it with ``SO_REUSEPORT`` so every worker process takes calls on it,
and otherwise a second process must fail to bind rather than silently share it. With
``--grpc-tls-cert/--grpc-tls-key`` every connection is TLS, ALPN ``h2``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Mapping

import trio

from bastion.core.networks import authority
from bastion.service.runtime import Runtime
from bastion.transports.grpc import health, reflection
from bastion.transports.grpc.calls import Counted, Method
from bastion.transports.grpc.connection import Connection, Dispatch

log = logging.getLogger("bastion.grpc")

#: Calls served at once by a process before RESOURCE_EXHAUSTED.
MAX_CONCURRENT_RPCS = 32
#: How long a client has to finish its TLS handshake.
HANDSHAKE_SECONDS = 10.0
BACKLOG = 1024


class GrpcListener:
    """Binds at construction (so a taken port fails before anything serves)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        services: Mapping[str, Mapping[str, Method]],
        port: int | None = None,
        share_port: bool = False,
    ) -> None:
        """``services``: each service's methods by name, under the service's full name.
        ``port`` overrides ``--grpc-port``; ``share_port`` binds it with SO_REUSEPORT
        (``--workers``: every worker process binds the same port)."""
        settings = runtime.settings
        self.health = health.Health(runtime.check_ready, [health.SERVICE, *services])
        table = {health.SERVICE: self.health.methods(), **services}
        if settings.enable_grpc_reflection:
            names = [*table, reflection.SERVICE]
            table[reflection.SERVICE] = reflection.Reflection(names).methods()
        methods = {
            f"/{service}/{name}".encode(): method
            for service, named in table.items()
            for name, method in named.items()
        }
        counted = {
            path: Counted(path.decode(), runtime.metrics)
            for path, method in methods.items()
            if method.unary is not None
        }
        self._dispatch = Dispatch(
            methods, counted, MAX_CONCURRENT_RPCS, request_timeout=settings.request_timeout
        )
        self._tls = _tls_context(settings.grpc_tls_cert, settings.grpc_tls_key)
        self._socket = _bind(
            settings.host, settings.grpc_port if port is None else port, share_port
        )
        self.port: int = self._socket.getsockname()[1]
        self._accepting = trio.CancelScope()
        self._calls: trio.Nursery | None = None
        self._closed = trio.Event()

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Take connections until :meth:`stop`; returns when every one has closed."""
        self._socket.listen(BACKLOG)
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(self._socket))
        try:
            async with trio.open_nursery() as connections:
                self._calls = connections
                log.info("grpc listening", extra={"port": self.port})
                task_status.started(self.port)
                with self._accepting:
                    while True:
                        stream = await listener.accept()
                        connections.start_soon(self._connection, stream)
                await listener.aclose()
        finally:
            self._closed.set()

    async def stop(self, grace: float) -> None:
        """Refuse new calls, let calls in flight finish (up to ``grace`` seconds), close."""
        self.health.enter_graceful_shutdown()
        self._dispatch.draining = True
        self._accepting.cancel()
        for connection in list(self._dispatch.connections):
            connection.drain()
        with trio.move_on_after(grace):
            await self._closed.wait()
        if self._calls is not None:
            self._calls.cancel_scope.cancel()
        await self._closed.wait()

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            peer = str(stream.socket.getpeername()[0])
        except OSError:
            await stream.aclose()
            return
        served: trio.abc.Stream = stream
        if self._tls is not None:
            secure = await _handshake(stream, self._tls)
            if secure is None:
                return
            served = secure
        try:
            await Connection(served, self._dispatch, peer).serve()
        except Exception:  # one connection's failure is not the listener's
            log.exception("gRPC connection failed", extra={"peer": peer})


async def _handshake(
    stream: trio.SocketStream, tls: ssl.SSLContext
) -> trio.SSLStream[trio.SocketStream] | None:
    """The TLS stream, or None (the connection closed) when the handshake failed or did
    not agree on ``h2``."""
    secure = trio.SSLStream(stream, tls, server_side=True)
    with trio.move_on_after(HANDSHAKE_SECONDS):
        # Not TLS, or a certificate the client refused: the connection just closes.
        with contextlib.suppress(trio.BrokenResourceError):
            await secure.do_handshake()
    if secure.selected_alpn_protocol() != "h2":
        await trio.aclose_forcefully(secure)
        return None
    return secure


def _bind(host: str, port: int, share: bool) -> socket.socket:
    where = authority(host, port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(f"cannot bind gRPC listener on {where}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if share:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot bind gRPC listener on {where}: {exc.strerror or exc}") from None
    return sock


def _tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """TLS 1.2 or later with ALPN ``h2``, which gRPC clients insist on."""
    if not cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(["h2"])
    return context
