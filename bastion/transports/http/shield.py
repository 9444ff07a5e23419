"""Keep hypercorn's connection bookkeeping out of reach of quart-trio's cancellation.

Hypercorn runs part of its HTTP/1.1 connection handling inside the ASGI ``send`` call that
ends a response: it tells the application's receive side that the exchange is over
(``http.disconnect``), then either restarts the connection for the next request and its
keep-alive idle timer, or closes it. quart-trio cancels the request's nursery the moment
its receive side sees that ``http.disconnect``, which is in the middle of that very call.
The cancellation then lands on hypercorn's next checkpoint:

- when the response ended before the request body had fully arrived (an early 403, 404,
  405 or 413), the close is lost: the connection stays open, hypercorn waits forever for
  the cycle that never restarts, and the client's next request on that keep-alive
  connection is never answered;
- otherwise the idle timer is never restarted, so an idle keep-alive connection is never
  closed.

Running the server's ``send`` under a shielded cancel scope lets it finish. Nothing is lost
by the shield: hypercorn already shields its socket writes, so a cancel could never stop a
``send`` that was waiting on the network.
"""

from __future__ import annotations

import trio
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    ASGISendEvent,
    Scope,
)

__all__ = ["shield_server_send"]


def shield_server_send(app: ASGIFramework) -> ASGIFramework:
    """``app`` with every ``send`` to the server run to completion, even when cancelled."""

    async def shielded_app(
        scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        async def shielded_send(message: ASGISendEvent) -> None:
            with trio.CancelScope(shield=True):
                await send(message)

        await app(scope, receive, shielded_send)

    return shielded_app
