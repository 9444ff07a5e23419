"""One trio process, one nursery: the HTTP, gRPC and metrics listeners.

Start-up binds every listener before any of them serves, so a taken port is a clean
failure. SIGTERM or SIGINT starts a graceful stop: the listeners stop accepting, calls
and requests in flight finish (up to ``--shutdown-timeout``), storage closes last.
"""

from __future__ import annotations

import gc
import logging
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets
from hypercorn.trio.run import worker_serve
from hypercorn.utils import wrap_app

from bastion import logs
from bastion.core.networks import authority
from bastion.core.settings import EXIT_CONFIG, Settings
from bastion.core.settings.cautions import startup_cautions
from bastion.service import tracing
from bastion.service.fga.opening import open_fga_store
from bastion.service.metrics import Metrics
from bastion.service.runtime import Runtime
from bastion.storage import SchemaMismatch, StorageUnavailable, open_storage
from bastion.storage_config import storage_config
from bastion.transports.graphql import playground
from bastion.transports.grpc.server import GrpcListener
from bastion.transports.grpc.services import services
from bastion.transports.http.app import MAX_BODY_BYTES
from bastion.transports.http.balance import WorkerShare
from bastion.transports.http.server import (
    HttpServer,
    ServerLimits,
    open_listeners,
    tls_context,
)
from bastion.web import build_http_app
from bastion.workers import worker_slot

log = logging.getLogger("bastion.server")

#: How long an idle keep-alive HTTP connection stays open.
KEEP_ALIVE_SECONDS = 5.0
#: A ``--workers`` worker's wait, at a stop, between closing its copy of the shared HTTP
#: socket and telling clients to close: time for its siblings, signalled at the same
#: moment, to close theirs, so that a client told to close finds the port closed.
SHARED_LISTENER_SETTLE = 0.25


@dataclass(frozen=True, slots=True)
class Listening:
    http: str
    metrics: str
    grpc: str | None


Serve = Callable[..., Awaitable[None]]


class ListenerUnavailable(Exception):
    """A port could not be listened on; the message names it and the flag that chose it."""


def _cannot_listen(host: str, port: int, flag: str, exc: OSError) -> ListenerUnavailable:
    reason = exc.strerror or str(exc)
    return ListenerUnavailable(f"cannot listen on {authority(host, port)} ({flag}): {reason}")


async def _http_listener(
    settings: Settings,
    host: str,
    port: int,
    app: Any,
    *,
    flag: str,
    inherited_fd: int | None = None,
    share: WorkerShare | None = None,
    tls: bool = True,
) -> Serve:
    """Bind ``host:port`` now (a taken port fails start-up before anything serves) and
    return what serves ``app`` there until a stop, reporting its address when it started.
    ``flag`` names the option that chose the port (for the error a taken port gives);
    ``inherited_fd``: a listening socket the ``--workers`` parent bound and handed down,
    ``share``: this worker's part in taking connections from it; ``tls``: False for a
    loopback listener only the ``--workers`` parent reads, plain HTTP even with TLS on."""
    if settings.http_server == "hypercorn":
        try:
            config, sockets = _hypercorn_config(host, port, settings, tls=tls)
        except OSError as exc:
            raise _cannot_listen(host, port, flag, exc) from None
        wrapped = wrap_app(app, MAX_BODY_BYTES, "asgi")

        async def serve_hypercorn(
            stop: trio.Event, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
        ) -> None:
            async with trio.open_nursery() as nursery:
                binds = await nursery.start(
                    partial(
                        worker_serve, wrapped, config, sockets=sockets, shutdown_trigger=stop.wait
                    )
                )
                task_status.started(binds[0])

        return serve_hypercorn
    # The application refuses a body over its route's limit with its own JSON answer; the
    # server's ceiling, twice the largest of those, only stops what the application no
    # longer reads (it must not cut in first: the client would get a plain-text 413).
    limits = ServerLimits(
        max_body_bytes=2 * max(MAX_BODY_BYTES, settings.graphql_max_body_bytes),
        keep_alive_timeout=KEEP_ALIVE_SECONDS,
        shutdown_timeout=settings.shutdown_timeout,
        stop_settle=0.0 if inherited_fd is None else SHARED_LISTENER_SETTLE,
    )
    if inherited_fd is None:
        try:
            listeners = await open_listeners(host, port)
        except OSError as exc:
            raise _cannot_listen(host, port, flag, exc) from None
    else:
        inherited = socket.socket(fileno=inherited_fd)
        listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(inherited))]
    server = HttpServer(app, limits, tls=tls_context(settings) if tls else None, share=share)
    return partial(server.serve, listeners)


def public_metrics_url(settings: Settings) -> str:
    """``/metrics`` on ``--metrics-host:--metrics-port`` (HTTPS when TLS is on)."""
    scheme = "https" if settings.tls_cert_file else "http"
    return f"{scheme}://{authority(settings.metrics_host, settings.metrics_port)}/metrics"


def _hypercorn_config(
    host: str, port: int, settings: Settings, *, tls: bool
) -> tuple[HypercornConfig, Sockets]:
    config = HypercornConfig()
    if tls and settings.tls_cert_file:
        config.certfile, config.keyfile = settings.tls_cert_file, settings.tls_key_file
    config.bind = [authority(host, port)]
    config.graceful_timeout = settings.shutdown_timeout
    config.keep_alive_timeout = KEEP_ALIVE_SECONDS
    config.accesslog = None
    config.errorlog = logging.getLogger("bastion.hypercorn")
    config.h11_max_incomplete_size = 64 * 1024
    config.wsgi_max_body_size = MAX_BODY_BYTES
    sockets = config.create_sockets()
    for sock in (*sockets.insecure_sockets, *sockets.secure_sockets):
        sock.listen(config.backlog)
    return config, sockets


async def _stop_on_signal(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("stopping", extra={"signal": signal.Signals(signum).name})
            stop.set()


async def serve(
    settings: Settings,
    *,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the server until ``stop`` is set (or a signal arrives)."""
    stop = stop or trio.Event()
    for warning in startup_cautions(settings):
        log.warning(warning)
    if settings.enable_playground and not playground.assets_built():
        log.warning(playground.NOT_BUILT)
    metrics = Metrics()
    slot = worker_slot()
    async with (
        open_storage(
            storage_config(settings, worker=slot is not None), opened=tracing.instrument
        ) as storage,
        open_fga_store(settings, storage) as fga_stores,
    ):
        try:
            await storage.ping()
        except StorageUnavailable as exc:
            # Started all the same (it may come up later): said now, not first by a request.
            log.warning(
                f"{exc.store} unreachable at start: /readyz answers 503 until it answers",
                extra={"store": exc.store, "error": str(exc)},
            )
        replica = None if fga_stores is None else fga_stores.replica
        if replica is None:
            metrics.watch_storage(storage.statistics)
        else:
            metrics.watch_storage(
                lambda: {**storage.statistics(), "replica": replica.db.statistics()}
            )
            metrics.watch_replica(replica.statistics)
        generations = None if fga_stores is None else fga_stores.generations
        if generations is not None:
            metrics.watch_generations(generations.reads)
        runtime = Runtime.build(settings, storage, metrics, fga_stores=fga_stores)
        metrics.watch_engine_cache(runtime.fga.caches.reads.statistics)
        metrics.watch_outbox(runtime.outbox)
        grpc_listener = (
            GrpcListener(
                runtime,
                services=services(runtime),
                port=None if slot is None else slot.grpc_port,
                share_port=slot is not None,
            )
            if settings.enable_grpc
            else None
        )
        app = build_http_app(runtime)
        serve_http = await _http_listener(
            settings,
            settings.host,
            settings.http_port,
            app,
            flag="--http-port",
            inherited_fd=None if slot is None else slot.http_fd,
            share=None if slot is None else slot.share(settings.workers),
        )
        # A worker's own metrics listen on loopback; its parent serves them all as one.
        metrics_host, metrics_port = (
            (settings.metrics_host, settings.metrics_port) if slot is None else ("127.0.0.1", 0)
        )
        serve_metrics = await _http_listener(
            settings,
            metrics_host,
            metrics_port,
            metrics.asgi_app(),
            flag="--metrics-port",
            tls=slot is None,
        )
        async with trio.open_nursery() as outer:
            outer.start_soon(_stop_on_signal, stop)
            outer.start_soon(runtime.fga.warm_up)
            outer.start_soon(runtime.pruner.run)
            await outer.start(runtime.outbox.run)
            async with trio.open_nursery() as listeners:
                http_address = await listeners.start(serve_http, stop)
                metrics_address = await listeners.start(serve_metrics, stop)
                grpc_address = None
                if grpc_listener is not None:
                    await listeners.start(grpc_listener.serve)
                    grpc_address = f"{settings.host}:{grpc_listener.port}"
                listening = Listening(http_address, metrics_address, grpc_address)
                # What start-up built (modules, the schema, the route table) lives as long
                # as the process: kept out of the cyclic collector's full collections.
                gc.freeze()
                if slot is not None:
                    slot.metrics_file.write_text(metrics_address)
                # A worker's own metrics listener is the parent's business: it advertises
                # the one /metrics its parent serves for every worker.
                where = {"metrics": listening.metrics + "/metrics"}
                if slot is not None:
                    where = {"worker": slot.index, "metrics": public_metrics_url(settings)}
                log.info(
                    "bastion listening",
                    extra={
                        "http": listening.http,
                        "grpc": listening.grpc or "disabled",
                        **where,
                        "database": settings.database_type,
                        "version": runtime.service.version,
                    },
                )
                task_status.started(listening)
                await stop.wait()
                if grpc_listener is not None:
                    await grpc_listener.stop(settings.shutdown_timeout)
            outer.cancel_scope.cancel()
    log.info("stopped")


def run(settings: Settings) -> int:
    """The console entry point's second half: serve, and turn start-up failures into exit codes."""
    logs.configure_for(settings)
    try:
        with tracing.started(settings):
            trio.run(partial(serve, settings))
    except StorageUnavailable as exc:
        print(f"bastion: storage unavailable: {exc}", file=sys.stderr)
        return 1
    except SchemaMismatch as exc:
        # A schema this build must not run on is a refused configuration, like a bad flag.
        print(f"bastion: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ListenerUnavailable as exc:
        print(f"bastion: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"bastion: cannot start listeners: {exc}", file=sys.stderr)
        return 1
    except BaseExceptionGroup as group:
        first = _first_leaf(group)
        if isinstance(first, ListenerUnavailable):
            print(f"bastion: {first}", file=sys.stderr)
            return 1
        if isinstance(first, SchemaMismatch):
            print(f"bastion: {first}", file=sys.stderr)
            return EXIT_CONFIG
        if isinstance(first, OSError | StorageUnavailable):
            print(f"bastion: cannot start: {first}", file=sys.stderr)
            return 1
        raise
    return 0


def _first_leaf(group: BaseExceptionGroup[Any]) -> BaseException:
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf
