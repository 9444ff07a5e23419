"""A request's deadline that never hides a write (issue 36): a 503 (gRPC's UNAVAILABLE)
means nothing was written.

:class:`RequestDeadline` runs a request's work in a cancel scope with the
``--request-timeout`` deadline, and makes the SQL transactions the work runs (through
:class:`~bastion.storage.sql.database.Database`, reads in autocommit aside) settle that
deadline's fate:

- while a transaction is in flight the deadline waits: the transaction is never
  abandoned halfway (a cancel racing a commit could answer 503 for a write that was
  committed); the database's own statement and lock timeouts (the same timeout) bound it;
- a transaction that wrote and committed lifts the deadline for the rest of the request:
  the client gets the outcome of what was written, never a 503 after it (every storage
  call left is bounded by its own timeout);
- one that did not write (or rolled back) puts the deadline back: past it, the request
  ends at its next checkpoint and is answered 503, with nothing written.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from types import TracebackType

import trio

from bastion.core.errors import Unavailable

__all__ = ["Ledger", "RequestDeadline", "current_ledger", "overrun"]


class Ledger:
    """The writes of one request and the deadline they hold; while it is entered, the
    request's ledger (:func:`current_ledger`).

    ``held`` is the scope's deadline while a transaction holds the request's: none by
    default; a gRPC call's own (``grpc-timeout``), which stays the client's to keep."""

    __slots__ = ("_deadline", "_held", "_in_flight", "_scope", "_token", "committed")

    def __init__(self, scope: trio.CancelScope, deadline: float, held: float = math.inf) -> None:
        self._scope = scope
        self._deadline = deadline
        self._held = held
        self._in_flight = 0
        #: a transaction of this request wrote and committed
        self.committed = False

    def __enter__(self) -> Ledger:
        self._token = _LEDGER.set(self)
        return self

    def __exit__(self, *_: object) -> None:
        _LEDGER.reset(self._token)

    def begin(self) -> None:
        """A transaction starts: the deadline waits for it."""
        self._in_flight += 1
        self._scope.deadline = self._held

    def end(self, *, wrote: bool) -> None:
        """A transaction ended; ``wrote``: it wrote and committed."""
        self._in_flight -= 1
        self.committed = self.committed or wrote
        if self._in_flight == 0 and not self.committed:
            self._scope.deadline = self._deadline


_LEDGER: ContextVar[Ledger | None] = ContextVar("bastion_request_ledger", default=None)


def current_ledger() -> Ledger | None:
    """The ledger of the request this task serves, if it runs under a deadline."""
    return _LEDGER.get()


class RequestDeadline:
    """The request's cancel scope: its deadline ``timeout`` seconds from now, held by the
    transactions it runs (see the module). ``scope.cancelled_caught`` after the block says
    the deadline ended the request: :func:`overrun` is then its answer.

    A class rather than a generator: it wraps every HTTP request."""

    __slots__ = ("_ledger", "_scope", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def __enter__(self) -> trio.CancelScope:
        scope = self._scope = trio.CancelScope(deadline=trio.current_time() + self.timeout)
        scope.__enter__()
        self._ledger = Ledger(scope, scope.deadline).__enter__()
        return scope

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> bool:
        self._ledger.__exit__()
        return self._scope.__exit__(kind, error, trace)


def overrun(timeout: float) -> Unavailable:
    """What a request the deadline ended answers, on every surface (503 over HTTP,
    UNAVAILABLE over gRPC): nothing was written, so a retry is safe."""
    return Unavailable(f"the request did not finish within {timeout:g}s")
