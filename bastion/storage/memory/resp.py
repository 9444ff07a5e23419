"""A small Redis client on trio streams: RESP2 requests encoded here, replies parsed by
hiredis's sans-IO ``Reader``, connections kept in a bounded pool.

Why not redis-py's client: its sync client blocks, so every call paid a hand-off to a
worker thread and back, which dominated the hot path (issue 18).

Rules:

- A connection carries one request (one command or a pipeline of several) at a time and
  is given back to the pool only once every reply to it has been read. Anything that
  interrupts a request midway (a cancellation, a timeout, a socket error, a malformed
  reply) closes the connection, so no later request can read a reply that was not its own.
- Socket errors, timeouts and replies meaning "not now" (``READONLY`` from a demoted
  master, ``LOADING``, ``MASTERDOWN``) become :class:`StorageUnavailable`. A request is
  tried again (twice, with a short backoff, as redis-py's ``Retry`` did) only where it
  did not run, or almost surely not: the connection could not be opened, the server
  refused it with one of those replies, or an idle connection turned out to be dead
  before it answered anything (a server restarted since; redis-py retried every command
  on any connection error).
- Any such failure also makes the pool forget where the server is (the next connection
  asks its locator again: a Sentinel's master moves) and close its idle connections.
- Requests made in the same pass of trio's scheduler (the requests of several HTTP
  callers woken together) go out as one pipeline on one connection: one write, one read
  and one wake-up of the server for all of them. Redis shares the machine's cores with
  the server, and a round trip a request was most of what a token validation cost
  (bench/RESULTS.md). Each caller gets the replies to its own commands; the first one
  sends for all, shielded when others joined, so that its cancellation cannot strand
  them (the pool's timeout still bounds it); a caller cancelled while waiting leaves,
  its commands run. A request nobody joined is cancellable midway, as above.
- A caller that will need a read later in its request, and will first make another
  request, can put the read on board (:meth:`Pool.ride`): it goes out in the same
  pipeline as that task's next request, and costs no round trip of its own. A rider
  whose carrier failed, or that is asked for before any request carried it, is sent on
  its own then, so only reads (safe to send twice) ride.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
import trio

from bastion.storage.errors import StorageUnavailable

__all__ = [
    "Address",
    "Arg",
    "Command",
    "ConnectOptions",
    "Connection",
    "ConnectionLost",
    "Pool",
    "ReplyError",
    "Rider",
    "connect",
    "encode",
]

Arg = bytes | str | int | float
Command = Sequence[Arg]
Address = tuple[str, int]

#: Error replies that say the server cannot take the command now; it did not run.
_NOT_NOW = ("READONLY", "LOADING", "MASTERDOWN")
_RETRIES = 2
_READ_SIZE = 65536


class ReplyError(Exception):
    """An error reply (``-ERR ...``): the command reached the server and was refused."""


class ConnectionLost(Exception):
    """The connection broke; ``answered`` says whether any reply byte had arrived."""

    def __init__(self, message: str, *, answered: bool) -> None:
        super().__init__(message)
        self.answered = answered


def encode(commands: Sequence[Command]) -> bytes:
    """The RESP arrays of bulk strings that send ``commands``, back to back."""
    out: list[bytes] = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            if isinstance(arg, bytes):
                data = arg
            elif isinstance(arg, str):
                data = arg.encode()
            elif isinstance(arg, int):
                data = b"%d" % arg
            else:
                data = repr(arg).encode()
            out.append(b"$%d\r\n" % len(data))
            out.append(data)
            out.append(b"\r\n")
    return b"".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectOptions:
    """What every new connection does before its first command."""

    timeout: float
    username: str | None = None
    password: str | None = None
    db: int = 0
    #: TLS when set (``rediss``)
    tls: ssl.SSLContext | None = None


class _Socket:
    """Plain TCP, driven by hand: a send or receive that can go at once goes at once, and
    only waiting for the reply yields to trio's scheduler. (A ``trio.SocketStream`` yields
    on every call, whether it must wait or not; that was most of a request's CPU.)"""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.waited = False

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self._sock.send(view) :]
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_writable(self._sock)

    async def receive_some(self, size: int) -> bytes:
        while True:
            try:
                return self._sock.recv(size)
            except BlockingIOError:
                self.waited = True
                await trio.lowlevel.wait_readable(self._sock)

    def close(self) -> None:
        trio.lowlevel.notify_closing(self._sock)
        self._sock.close()


class _Tls:
    """TLS through ``trio.SSLStream`` (every call a checkpoint)."""

    def __init__(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self._stream = stream
        self.waited = True

    async def send_all(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def receive_some(self, size: int) -> bytes:
        return bytes(await self._stream.receive_some(size))

    def close(self) -> None:
        self._stream.transport_stream.socket.close()


class Connection:
    """One socket and its reply parser; unusable once a request was interrupted."""

    def __init__(self, channel: _Socket | _Tls) -> None:
        self._channel = channel
        self._reader = hiredis.Reader(replyError=ReplyError)
        self._answered = False
        self.usable = True
        self.generation = 0

    async def request(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` in one write and read one reply for each (an error reply is
        returned as a :class:`ReplyError`, not raised). A checkpoint, as every trio call."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self.usable:
            raise ConnectionLost("connection closed", answered=False)
        self._answered = self._channel.waited = False
        try:
            await self._channel.send_all(encode(commands))
            replies = [await self._reply() for _ in commands]
            if not self._channel.waited:
                await trio.lowlevel.cancel_shielded_checkpoint()
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.close()
            raise ConnectionLost(f"connection lost: {exc!r}", answered=self._answered) from exc
        except hiredis.ProtocolError as exc:
            self.close()
            raise ConnectionLost(f"malformed reply: {exc}", answered=True) from exc
        except BaseException:
            # Cancelled (or anything else) midway: a reply may still be on its way.
            self.close()
            raise
        return replies

    async def _reply(self) -> Any:
        reply = self._reader.gets()
        while reply is False:
            data = await self._channel.receive_some(_READ_SIZE)
            if not data:
                raise ConnectionLost("the server closed the connection", answered=self._answered)
            self._answered = True
            self._reader.feed(data)
            reply = self._reader.gets()
        return reply

    def close(self) -> None:
        """Close at once, without a goodbye (synchronous, so it is safe while cancelled)."""
        if self.usable:
            self.usable = False
            self._channel.close()


async def connect(address: Address, options: ConnectOptions) -> Connection:
    """A connection to ``address``, authenticated and on ``options.db``; OSError (or
    TooSlowError after ``options.timeout``) if it cannot be made ready."""
    host, port = address
    with trio.fail_after(options.timeout):
        stream = await trio.open_tcp_stream(host, port)
        try:
            if options.tls is not None:
                tls = trio.SSLStream(stream, options.tls, server_hostname=host)
                await tls.do_handshake()
                connection = Connection(_Tls(tls))
            else:
                family, kind = stream.socket.family, stream.socket.type
                connection = Connection(
                    _Socket(socket.socket(family, kind, 0, stream.socket.detach()))
                )
            hello: list[Command] = []
            if options.password is not None:
                user = [options.username] if options.username else []
                hello.append(["AUTH", *user, options.password])
            if options.db:
                hello.append(["SELECT", options.db])
            replies = await connection.request(hello) if hello else []
        except BaseException:
            stream.socket.close()
            raise
    for reply in replies:
        if isinstance(reply, ReplyError):
            connection.close()
            raise OSError(f"redis refused the connection's set-up: {reply}")
    return connection


class _Batch:
    """Requests made in one pass of the scheduler, sent as one pipeline."""

    __slots__ = ("commands", "done", "error", "replies")

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.done = trio.Event()
        self.replies: list[Any] = []
        self.error: BaseException | None = None


class Rider:
    """Commands waiting to go out with their task's next request (:meth:`Pool.ride`)."""

    __slots__ = ("commands", "replies")

    def __init__(self, commands: Sequence[Command]) -> None:
        self.commands = commands
        #: set once a request carried them and it succeeded
        self.replies: list[Any] | None = None


class Pool:
    """At most ``size`` connections to wherever ``locate`` says the server is."""

    def __init__(
        self,
        locate: Callable[[], Awaitable[Address]],
        options: ConnectOptions,
        *,
        size: int,
        forget: Callable[[], None] = lambda: None,
    ) -> None:
        self._locate = locate
        self._forget = forget
        self._options = options
        self._timeout = options.timeout
        self._slots = trio.Semaphore(size)
        self._idle: list[Connection] = []
        self._generation = 0
        self._closed = False
        self.opened = 0
        self.unavailable = 0
        #: the batch that requests made now join, until its first caller sends it
        self._forming: _Batch | None = None
        #: each task's riders, until its next request carries them
        self._riders: dict[trio.lowlevel.Task, list[Rider]] = {}

    def ride(self, commands: Sequence[Command]) -> Rider:
        """``commands`` go out with this task's next request, in the same pipeline; their
        replies are then :meth:`replies`'s. The caller must :meth:`replies` or
        :meth:`unseat` the rider, or it waits for the task's next request."""
        rider = Rider(commands)
        self._riders.setdefault(trio.lowlevel.current_task(), []).append(rider)
        return rider

    def unseat(self, rider: Rider) -> None:
        """Take ``rider`` off its task's next request, if no request carried it yet."""
        task = trio.lowlevel.current_task()
        waiting = self._riders.get(task)
        if waiting is not None and rider in waiting:
            waiting.remove(rider)
            if not waiting:
                del self._riders[task]

    async def replies(self, rider: Rider) -> list[Any]:
        """The replies to ``rider``'s commands: carried already, or sent now on their own."""
        if rider.replies is None:
            self.unseat(rider)
            rider.replies = await self.request(rider.commands)
        return rider.replies

    async def request(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to ``commands``, sent as one pipeline on one connection, with
        those of the other requests made in the same scheduler pass and this task's
        riders."""
        riders = self._riders.pop(trio.lowlevel.current_task(), None) if self._riders else None
        if riders is None:
            return await self._batched(commands)
        replies = await self._batched([*commands, *(c for r in riders for c in r.commands)])
        at = len(commands)
        for rider in riders:
            rider.replies = replies[at : at + len(rider.commands)]
            at += len(rider.commands)
        return replies[: len(commands)]

    async def _batched(self, commands: Sequence[Command]) -> list[Any]:
        batch = self._forming
        if batch is not None:
            start = len(batch.commands)
            batch.commands.extend(commands)
            await batch.done.wait()
            if batch.error is not None:
                if isinstance(batch.error, StorageUnavailable):
                    raise StorageUnavailable(str(batch.error)) from batch.error
                raise StorageUnavailable("the redis memory store failed") from batch.error
            return batch.replies[start : start + len(commands)]
        batch = self._forming = _Batch()
        batch.commands.extend(commands)
        try:
            # The others of this pass join meanwhile; a schedule point, not a cancel point.
            await trio.lowlevel.cancel_shielded_checkpoint()
            self._forming = None
            if len(batch.commands) == len(commands):
                batch.replies = await self._request(commands)  # alone: cancellable midway
            else:
                with trio.CancelScope(shield=True):
                    batch.replies = await self._request(batch.commands)
        except BaseException as exc:
            batch.error = exc
            raise
        finally:
            if self._forming is batch:
                self._forming = None
            batch.done.set()
        return batch.replies[: len(commands)]

    async def _request(self, commands: Sequence[Command]) -> list[Any]:
        failures = 0
        while True:
            try:
                return await self._attempt(commands)
            except _Retry as retry:
                self._lost()
                failures += 1
                if failures > _RETRIES:
                    self.unavailable += 1
                    raise StorageUnavailable(str(retry)) from retry.__cause__
                await trio.sleep(min(0.5, 0.05 * 2**failures))
            except StorageUnavailable:
                self._lost()
                self.unavailable += 1
                raise

    async def aclose(self) -> None:
        """Close every idle connection; those in use close as they come back."""
        self._closed = True
        self._lost()
        await trio.lowlevel.checkpoint()

    async def _attempt(self, commands: Sequence[Command]) -> list[Any]:
        try:
            self._slots.acquire_nowait()  # no yield when a slot is free: requests checkpoint
        except trio.WouldBlock:
            await self._slots.acquire()
        try:
            return await self._on_a_connection(commands)
        finally:
            self._slots.release()

    async def _on_a_connection(self, commands: Sequence[Command]) -> list[Any]:
        connection = self._idle.pop() if self._idle else None
        reused = connection is not None
        if connection is None:
            connection = await self._open()
        try:
            # A bare scope, not fail_after: the hot path's cheapest deadline.
            replies: list[Any] = []
            with trio.CancelScope(deadline=trio.current_time() + self._timeout) as scope:
                replies = await connection.request(commands)
            if scope.cancelled_caught:
                raise StorageUnavailable("the redis memory store did not answer in time")
            for reply in replies:
                if isinstance(reply, ReplyError) and str(reply).startswith(_NOT_NOW):
                    connection.close()
                    raise _Retry(f"redis memory store: {reply}")
        except ConnectionLost as lost:
            if reused and not lost.answered:
                raise _Retry(str(lost)) from lost
            raise StorageUnavailable(f"redis memory store: {lost}") from lost
        finally:
            current = connection.generation == self._generation
            if connection.usable and current and not self._closed:
                self._idle.append(connection)
            else:
                connection.close()
        return replies

    async def _open(self) -> Connection:
        if self._closed:
            raise StorageUnavailable("the redis memory store is closed")
        try:
            address = await self._locate()
            connection = await connect(address, self._options)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            raise _Retry(f"cannot reach the redis memory store: {exc!r}") from exc
        connection.generation = self._generation
        self.opened += 1
        return connection

    def _lost(self) -> None:
        """Forget the server's address and every idle connection to it."""
        self._forget()
        self._generation += 1
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class _Retry(Exception):
    """The request did not run; it may be tried again."""
