"""What the suite's mail and SMS sinks share: a ``HOST:PORT`` option, a server thread, and
the one sink of each kind a run has started (rows that need it skip without one)."""

from __future__ import annotations

import socketserver
import threading
from typing import Generic, Protocol, TypeVar

__all__ = ["Registry", "Running", "parse_address"]


class _Addressed(Protocol):
    host: str
    port: int


S = TypeVar("S", bound=_Addressed)


def parse_address(spec: str, option: str) -> tuple[str, int]:
    host, sep, port = spec.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{option} wants HOST:PORT, got {spec!r}")
    return host, int(port)


class Registry(Generic[S]):
    """The sink of one kind this run started, if any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: S | None = None

    def current(self) -> S | None:
        return self._current

    def hold(self, sink: S) -> None:
        with self._lock:
            self._current = sink

    def release(self, sink: S) -> None:
        with self._lock:
            if self._current is sink:
                self._current = None


class Running(Generic[S]):
    """A started sink, serving on its own thread; :meth:`stop` shuts it down and forgets
    it."""

    def __init__(self, registry: Registry[S], server: socketserver.BaseServer, sink: S) -> None:
        self._registry, self._server, self.sink = registry, server, sink
        threading.Thread(target=server.serve_forever, daemon=True).start()
        registry.hold(sink)

    def stop(self) -> None:
        self._registry.release(self.sink)
        self._server.shutdown()
        self._server.server_close()
