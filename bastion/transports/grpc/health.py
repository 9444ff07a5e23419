"""``grpc.health.v1.Health``: Check, List and Watch.

Check and List also prove storage is ready, as ``/readyz`` does: a service that is
SERVING answers NOT_SERVING while storage does not answer. Watch streams a service's
status as it changes; a graceful stop makes every service NOT_SERVING, tells the
watchers, and ends their streams so the stop need not wait for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

import trio
from grpc_health.v1 import health_pb2

from bastion.storage import StorageUnavailable
from bastion.transports.grpc.calls import Abort, Call, Method, Status

SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
_Response = health_pb2.HealthCheckResponse
SERVING: int = _Response.SERVING
NOT_SERVING: int = _Response.NOT_SERVING


class Health:
    def __init__(self, check_ready: Callable[[], Awaitable[None]], names: Iterable[str]) -> None:
        """Every service in ``names``, and the server as a whole (``""``), SERVING."""
        self._check_ready = check_ready
        self._statuses = dict.fromkeys(["", *names], SERVING)
        self._changed = trio.Event()
        self._stopping = False

    def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING from now on."""
        self._statuses = dict.fromkeys(self._statuses, NOT_SERVING)
        self._stopping = True
        self._changed.set()

    def methods(self) -> dict[str, Method]:
        request = health_pb2.HealthCheckRequest.FromString
        return {
            "Check": Method(request, unary=self.check),
            "List": Method(health_pb2.HealthListRequest.FromString, unary=self.list),
            "Watch": Method(request, streaming=self.watch),
        }

    async def check(
        self, request: health_pb2.HealthCheckRequest, call: Call
    ) -> health_pb2.HealthCheckResponse:
        status = self._statuses.get(request.service)
        if status is None:
            raise Abort(Status.NOT_FOUND)
        if status == SERVING and not await self._storage_ready():
            status = NOT_SERVING
        return _Response(status=status)

    async def list(
        self, request: health_pb2.HealthListRequest, call: Call
    ) -> health_pb2.HealthListResponse:
        """Every service's status, as Check answers it for each."""
        statuses = self._statuses
        if SERVING in statuses.values() and not await self._storage_ready():
            statuses = dict.fromkeys(statuses, NOT_SERVING)
        return health_pb2.HealthListResponse(
            statuses={name: _Response(status=status) for name, status in statuses.items()}
        )

    async def watch(
        self, requests: AsyncIterator[health_pb2.HealthCheckRequest], call: Call
    ) -> AsyncIterator[health_pb2.HealthCheckResponse]:
        async for request in requests:
            service = request.service
            break
        else:
            raise Abort(Status.INVALID_ARGUMENT, "Watch takes one request")
        sent = None
        while True:
            changed = self._changed
            status = self._statuses.get(service, _Response.SERVICE_UNKNOWN)
            if status != sent:
                yield _Response(status=status)
                sent = status
            if self._stopping:
                return
            await changed.wait()

    async def _storage_ready(self) -> bool:
        try:
            await self._check_ready()
        except StorageUnavailable:
            return False
        return True
