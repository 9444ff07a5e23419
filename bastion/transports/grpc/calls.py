"""What a gRPC method is to the server, and what a handler sees of its call.

A :class:`Method` is a unary handler (one request message in, one reply out) or a
streaming one (an async iterator of requests in, an async iterator of replies out: health
Watch and reflection). A handler refuses a call by raising :class:`Abort`; anything else
it raises is the server's error. Unary calls are counted in the metrics by method and
code, and timed (:class:`Counted`); streaming ones are not, as under grpcio before.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from google.protobuf.message import Message

from bastion.service.metrics import Metrics


class Status(IntEnum):
    """gRPC's status codes (``grpc-status``)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


#: Metadata as it goes on the wire: a ``-bin`` key's value is bytes, any other's text.
Metadata = tuple[tuple[str, str | bytes], ...]


class Abort(Exception):
    """Ends the call with ``status``, ``message`` and trailing metadata ``trailers``."""

    def __init__(self, status: Status, message: str = "", trailers: Metadata = ()) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message
        self.trailers = trailers


class Call:
    """One call as its handler sees it."""

    __slots__ = ("initial_metadata", "metadata", "peer")

    def __init__(self, metadata: dict[str, str | bytes], peer: str) -> None:
        #: The caller's metadata by lower-case key; a repeated key keeps its last value.
        self.metadata = metadata
        #: The caller's IP address.
        self.peer = peer
        #: What the reply's headers carry besides gRPC's own (``set-cookie``).
        self.initial_metadata: Metadata = ()


Unary = Callable[[Any, Call], Awaitable[Message]]
Streaming = Callable[[AsyncIterator[Any], Call], AsyncIterator[Message]]


@dataclass(frozen=True, slots=True)
class Method:
    """A method of the table the server dispatches on, by path (``/pkg.Service/Method``)."""

    decode: Callable[[bytes], Message]
    unary: Unary | None = None
    streaming: Streaming | None = None


@dataclass(slots=True)
class Counted:
    """A unary method's ``bastion_grpc_*`` series: a code's series appears on its first
    call, as ``labels`` makes it, and is kept, so a call costs no label lookups."""

    method: str
    metrics: Metrics
    codes: dict[Status, Any] = field(default_factory=dict)
    timed: Any = None

    def observe(self, status: Status, started: float) -> None:
        if (calls := self.codes.get(status)) is None:
            calls = self.codes[status] = self.metrics.grpc_requests.labels(self.method, status.name)
        calls.inc()
        if self.timed is None:
            self.timed = self.metrics.grpc_latency.labels(self.method)
        self.timed.observe(time.perf_counter() - started)
