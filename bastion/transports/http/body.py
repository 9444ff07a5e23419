"""The request body as the application receives it: counted against a limit, and
finished (read to its end and dropped) when an answer came before all of it was read."""

from __future__ import annotations

import math

import trio
from starlette.types import Message, Receive

from bastion.core import errors

__all__ = ["BodyReceiver"]


class BodyReceiver:
    """The ASGI ``receive`` the application reads through.

    ``limit`` may be lowered per route before the body is read; a declared
    ``Content-Length`` over it is refused before a byte is read, a chunked body as soon as
    what arrived passes it (413 ``payload_too_large``: the connection then closes).
    """

    __slots__ = ("_receive", "complete", "declared", "limit", "received", "too_large")

    def __init__(self, receive: Receive, limit: int, declared: int | None) -> None:
        self._receive = receive
        self.limit = limit
        self.declared = declared
        self.received = 0
        self.complete = declared == 0
        self.too_large = False

    async def __call__(self) -> Message:
        if self.declared is not None and self.declared > self.limit:
            self.too_large = True
        if self.too_large:
            raise errors.PayloadTooLarge("request body too large")
        if self.complete:
            # Read to its end already: what follows can only be the client going away.
            return await self._receive()
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            self.complete = not message.get("more_body", False)
            if self.received > self.limit:
                self.too_large = True
                raise errors.PayloadTooLarge("request body too large")
        elif message["type"] == "http.disconnect":
            self.complete = True
        return message

    async def finish(self, seconds: float | None) -> bool:
        """Receive and drop whatever of the body no handler read; False if it cannot.

        An answer given before the body has arrived (CSRF 403, 404, 405, a rate limit)
        would otherwise leave the rest of the body on the connection: the server then
        cannot reuse it and closes it under a client that may still be writing, which can
        lose the answer. A body over the limit, or one that stops arriving, is not waited
        for: the connection closes instead.
        """
        with trio.move_on_after(math.inf if seconds is None else seconds) as waited:
            try:
                while not self.complete:
                    await self()
            except errors.PayloadTooLarge:
                return False
        return not waited.cancelled_caught
