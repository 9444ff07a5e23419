"""A request's deadline that never hides a write (issue 36): a 503 means nothing was
written.

:func:`request_deadline` runs a request's work in a cancel scope with the
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
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import trio

__all__ = ["Ledger", "current_ledger", "request_deadline"]


class Ledger:
    """The writes of one request and the deadline they hold."""

    __slots__ = ("_deadline", "_in_flight", "_scope", "committed")

    def __init__(self, scope: trio.CancelScope, deadline: float) -> None:
        self._scope = scope
        self._deadline = deadline
        self._in_flight = 0
        #: a transaction of this request wrote and committed
        self.committed = False

    def begin(self) -> None:
        """A transaction starts: the deadline waits for it."""
        self._in_flight += 1
        self._scope.deadline = math.inf

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


@contextmanager
def request_deadline(timeout: float) -> Iterator[trio.CancelScope]:
    """The request's cancel scope: its deadline ``timeout`` seconds from now, held by the
    transactions it runs (see the module). ``scope.cancelled_caught`` after the block says
    the deadline ended the request."""
    with trio.CancelScope(deadline=trio.current_time() + timeout) as scope:
        token = _LEDGER.set(Ledger(scope, scope.deadline))
        try:
            yield scope
        finally:
            _LEDGER.reset(token)
