"""Running trio work from grpcio's handler threads.

grpcio calls handlers on its own thread pool. A handler hands its work to the server's
trio loop and blocks until it is done. The work runs inside a cancel scope whose
deadline is the call's deadline, and which is cancelled when the call ends early
(client cancellation, connection loss), so a timed-out call never leaves a database
query running behind it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
import trio

T = TypeVar("T")


class CallCancelled(Exception):
    """The call's deadline passed or the client went away before the work finished."""


def run_for_call(
    token: trio.lowlevel.TrioToken,
    context: grpc.ServicerContext,
    fn: Callable[[], Awaitable[T]],
) -> T:
    scope_holder: list[trio.CancelScope] = []
    ended = returned = False

    def on_call_end() -> None:
        # grpcio calls this when the call ends, which for nearly every call is after the
        # handler returned: then there is nothing left to cancel (and no trip into trio).
        nonlocal ended
        ended = True
        if scope_holder and not returned:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(scope_holder[0].cancel)

    async def runner() -> tuple[bool, T | None]:
        nonlocal returned
        with trio.CancelScope() as scope:
            remaining = context.time_remaining()
            if remaining is not None:
                scope.deadline = trio.current_time() + max(0.0, remaining)
            scope_holder.append(scope)
            if ended:
                scope.cancel()
            try:
                return True, await fn()
            finally:
                returned = True
        return False, None

    if not context.add_callback(on_call_end):
        raise CallCancelled  # the call ended before its handler ran: nothing to start
    finished, result = trio.from_thread.run(runner, trio_token=token)
    if not finished:
        raise CallCancelled
    return result  # type: ignore[return-value]
