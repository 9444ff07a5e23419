"""The gRPC listener: grpcio's server on ``--host:--grpc-port``.

grpcio runs handlers on a thread pool; each handler hands its work to the trio loop
through :mod:`transports.grpc.bridge`. ``maximum_concurrent_rpcs`` equals the pool size,
so an overloaded server answers RESOURCE_EXHAUSTED at once instead of queueing calls
past their deadlines. ``grpc.so_reuseport`` is off: a second process must fail to bind
the port rather than silently share it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import grpc
import trio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from bastion.core.networks import authority
from bastion.service.metrics import Metrics
from bastion.service.runtime import Runtime
from bastion.storage import StorageUnavailable
from bastion.transports.grpc.bridge import CallCancelled, run_for_call

log = logging.getLogger("bastion.grpc")

#: Handler threads, and the number of calls served at once before RESOURCE_EXHAUSTED.
MAX_CONCURRENT_RPCS = 32


class _StorageAwareHealth(health.HealthServicer):
    """``grpc.health.v1.Health`` whose Check also proves storage is ready, like /readyz."""

    def __init__(self, runtime: Runtime, token: trio.lowlevel.TrioToken) -> None:
        super().__init__()
        self._runtime = runtime
        self._token = token

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = super().Check(request, context)
        if response.status != health_pb2.HealthCheckResponse.SERVING or self._storage_ready(
            context
        ):
            return response
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        """Every registered service's status, as Check answers it for each."""
        with self._lock:
            statuses = dict(self._server_status)
        serving = health_pb2.HealthCheckResponse.SERVING
        if serving in statuses.values() and not self._storage_ready(context):
            statuses = dict.fromkeys(statuses, health_pb2.HealthCheckResponse.NOT_SERVING)
        return health_pb2.HealthListResponse(
            statuses={
                name: health_pb2.HealthCheckResponse(status=status)
                for name, status in statuses.items()
            }
        )

    def _storage_ready(self, context: grpc.ServicerContext) -> bool:
        try:
            run_for_call(self._token, context, self._runtime.check_ready)
        except StorageUnavailable:
            return False
        except CallCancelled:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        return True


def _observed(method: str, handler: grpc.RpcMethodHandler, metrics: Metrics) -> Any:
    """``handler`` (a unary one) counting its calls by code and timing them in ``metrics``,
    and answering an undecodable request INVALID_ARGUMENT. Built once per method: an
    interceptor would build it again for every call."""
    if handler.unary_unary is None:
        return handler
    behavior = handler.unary_unary
    decode = handler.request_deserializer
    counted: dict[grpc.StatusCode, Any] = {}
    timed: list[Any] = []

    def tolerant(data: bytes) -> Any:
        # grpcio answers a deserializer's exception with INTERNAL and a traceback at
        # error level; an undecodable request is the caller's mistake: keep it.
        try:
            return decode(data) if decode is not None else data
        except Exception as exc:  # protobuf raises DecodeError, and others on garbage
            return _Undecodable(str(exc) or type(exc).__name__)

    def observed(request: Any, context: grpc.ServicerContext) -> Any:
        started = time.perf_counter()
        try:
            if isinstance(request, _Undecodable):
                log.warning("undecodable gRPC request to %s: %s", method, request.reason)
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "the request is not a valid protobuf message for this method",
                )
            return behavior(request, context)
        finally:
            code = context.code() or grpc.StatusCode.OK
            # A series appears on its first call, as ``labels`` makes it; then it is kept.
            if (calls := counted.get(code)) is None:
                calls = counted[code] = metrics.grpc_requests.labels(method, code.name)
            calls.inc()
            if not timed:
                timed.append(metrics.grpc_latency.labels(method))
            timed[0].observe(time.perf_counter() - started)

    return grpc.unary_unary_rpc_method_handler(
        observed, request_deserializer=tolerant, response_serializer=handler.response_serializer
    )


class _ObservedGeneric(grpc.GenericRpcHandler):
    """A generic handler whose unary handlers are :func:`_observed`, each built once."""

    def __init__(self, inner: grpc.GenericRpcHandler, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics
        self._built: dict[str, Any] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        if (built := self._built.get(method)) is None:
            handler = self._inner.service(handler_call_details)
            if handler is None:
                return None
            built = self._built[method] = _observed(method, handler, self._metrics)
        return built


class _ObservingServer:
    """The server as the generated ``add_*Servicer_to_server`` functions see it: every
    handler they add is observed (:func:`_observed`)."""

    def __init__(self, server: grpc.Server, metrics: Metrics) -> None:
        self._server = server
        self._metrics = metrics

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(
            tuple(_ObservedGeneric(handler, self._metrics) for handler in handlers)
        )

    def add_registered_method_handlers(
        self, service: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        self._server.add_registered_method_handlers(
            service,
            {
                name: _observed(f"/{service}/{name}", handler, self._metrics)
                for name, handler in handlers.items()
            },
        )


@dataclass(frozen=True, slots=True)
class _Undecodable:
    reason: str


class GrpcListener:
    """Binds at construction (so a taken port fails before anything serves)."""

    def __init__(
        self,
        runtime: Runtime,
        token: trio.lowlevel.TrioToken,
        *,
        register: Iterable[Callable[[grpc.Server], str]] = (),
        port: int | None = None,
        share_port: bool = False,
    ) -> None:
        """``port`` overrides ``--grpc-port``; ``share_port`` binds it with SO_REUSEPORT
        (``--workers``: every worker process binds the same port). Otherwise a taken port
        is an error, not a second listener."""
        settings = runtime.settings
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=MAX_CONCURRENT_RPCS, thread_name_prefix="grpc"),
            options=[("grpc.so_reuseport", 1 if share_port else 0)],
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        )
        observing = cast(grpc.Server, _ObservingServer(self.server, runtime.metrics))
        self.health = _StorageAwareHealth(runtime, token)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, observing)
        names = [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
        names += [add(observing) for add in register]
        for name in names:
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        if settings.enable_grpc_reflection:
            reflection.enable_server_reflection([*names, reflection.SERVICE_NAME], observing)
        address = authority(settings.host, settings.grpc_port if port is None else port)
        try:
            if settings.grpc_tls_cert:
                credentials = grpc.ssl_server_credentials(
                    [
                        (
                            Path(settings.grpc_tls_key).read_bytes(),
                            Path(settings.grpc_tls_cert).read_bytes(),
                        )
                    ]
                )
                self.port = self.server.add_secure_port(address, credentials)
            else:
                self.port = self.server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot bind gRPC listener on {address}: {exc}") from None
        if self.port == 0:
            raise OSError(f"cannot bind gRPC listener on {address}")

    def start(self) -> None:
        self.server.start()
        log.info("grpc listening", extra={"port": self.port})

    async def stop(self, grace: float) -> None:
        """Refuse new calls, let calls in flight finish (up to ``grace`` seconds)."""
        self.health.enter_graceful_shutdown()
        done = self.server.stop(grace)
        await trio.to_thread.run_sync(done.wait)
