"""The gRPC server's HTTP/2 edges, met by grpcio's own client: flow control, status text,
binary metadata, compression, size limits, and draining. A test's methods are served by
:class:`~bastion.transports.grpc.connection.Connection` on a loopback port."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import grpc
import h2.config
import h2.connection
import h2.events
import trio
import trio.lowlevel
import trio.testing
from google.protobuf.wrappers_pb2 import BytesValue

from bastion.service.metrics import Metrics
from bastion.storage.deadline import current_ledger
from bastion.transports.grpc.calls import Abort, Call, Counted, Method, Status
from bastion.transports.grpc.connection import MAX_RECEIVE, Connection, Dispatch

#: How long a test waits for something that must happen (not a performance bound).
PATIENCE = 30.0


@asynccontextmanager
async def serving(
    methods: dict[str, Method], request_timeout: float = math.inf
) -> AsyncIterator[tuple[str, Dispatch, trio.Event]]:
    """The target to call, the server's state, and an event set when a connection closes."""
    paths = {f"/test.Echo/{name}".encode(): method for name, method in methods.items()}
    metrics = Metrics()
    counted = {path: Counted(path.decode(), metrics) for path in paths}
    dispatch = Dispatch(paths, counted, limit=32, request_timeout=request_timeout)

    closed = trio.Event()

    async def connection(stream: trio.SocketStream) -> None:
        await Connection(stream, dispatch, "127.0.0.1").serve()
        closed.set()

    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(partial(trio.serve_listeners, connection, listeners))
        yield f"127.0.0.1:{port}", dispatch, closed
        nursery.cancel_scope.cancel()


def unary(handler: Callable[[BytesValue, Call], Any]) -> Method:
    async def handle(request: BytesValue, call: Call) -> BytesValue:
        return await handler(request, call)  # type: ignore[no-any-return]

    return Method(BytesValue.FromString, unary=handle)


async def call(target: str, method: str, value: bytes, **options: Any) -> Any:
    """One call from grpcio's client in a thread: (reply, call) or the RpcError."""

    def blocking() -> Any:
        settings = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        with grpc.insecure_channel(target, options=settings) as channel:
            stub = channel.unary_unary(
                f"/test.Echo/{method}",
                request_serializer=BytesValue.SerializeToString,
                response_deserializer=BytesValue.FromString,
            )
            try:
                return stub.with_call(BytesValue(value=value), **{"timeout": PATIENCE, **options})
            except grpc.RpcError as error:
                return error

    return await trio.to_thread.run_sync(blocking)


async def test_a_reply_larger_than_the_flow_control_window_arrives_whole() -> None:
    async def big(request: BytesValue, call: Call) -> BytesValue:
        return BytesValue(value=request.value * (8 * 1024 * 1024 // len(request.value)))

    async with serving({"Big": unary(big)}) as (target, _, _):
        reply, _ = await call(target, "Big", b"0123456789abcdef")
    assert reply.value == b"0123456789abcdef" * (512 * 1024)


async def test_status_text_and_binary_metadata_cross_the_wire_unchanged() -> None:
    message = "50% naïve ✓\nsecond line"

    async def refuse(request: BytesValue, call: Call) -> BytesValue:
        raise Abort(
            Status.FAILED_PRECONDITION,
            message,
            (("echo-bin", call.metadata["data-bin"]), ("plain", "text")),
        )

    raw = b"\x00\xff\xfe binary"
    async with serving({"Refuse": unary(refuse)}) as (target, _, _):
        error = await call(target, "Refuse", b"", metadata=[("data-bin", raw)])
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == message
    trailing = dict(error.trailing_metadata())
    assert (trailing["echo-bin"], trailing["plain"]) == (raw, "text")


async def test_compressed_requests_are_unimplemented_and_large_ones_refused() -> None:
    async def echo(request: BytesValue, call: Call) -> BytesValue:
        return request

    async with serving({"Echo": unary(echo)}) as (target, dispatch, _):
        compressed = await call(target, "Echo", b"x" * 100, compression=grpc.Compression.Gzip)
        too_large = await call(target, "Echo", b"x" * (MAX_RECEIVE + 1))
        reply, _ = await call(target, "Echo", b"x" * 100)
        counted = dispatch.counted[b"/test.Echo/Echo"].codes
    assert compressed.code() == grpc.StatusCode.UNIMPLEMENTED
    assert too_large.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert reply.value == b"x" * 100
    # Only the call that reached its handler is counted.
    assert set(counted) == {Status.OK}


async def test_a_drained_connection_finishes_its_calls_then_closes() -> None:
    entered, release = trio.Event(), trio.Event()

    async def slow(request: BytesValue, call: Call) -> BytesValue:
        entered.set()
        await release.wait()
        return request

    async with serving({"Slow": unary(slow)}) as (target, dispatch, closed):
        outcome: list[Any] = []

        async def caller() -> None:
            outcome.append(await call(target, "Slow", b"done"))

        with trio.fail_after(PATIENCE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await entered.wait()
                (connection,) = dispatch.connections
                connection.drain()
                await trio.testing.wait_all_tasks_blocked()
                assert dispatch.connections == {connection}  # open while its call runs
                release.set()
            await closed.wait()
        assert not dispatch.connections
    reply, _ = outcome[0]
    assert reply.value == b"done"


async def test_a_unary_request_longer_than_its_message_is_refused_before_it_ends() -> None:
    """A client that declares a one-byte message and keeps sending is answered INTERNAL
    at once; the server does not buffer the rest until the stream ends."""

    async def echo(request: BytesValue, call: Call) -> BytesValue:
        return request

    async with serving({"Echo": unary(echo)}) as (target, dispatch, _):
        host, port = target.split(":")
        stream = await trio.open_tcp_stream(host, int(port))
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        client.send_headers(
            1,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/test.Echo/Echo"),
                (":authority", target),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        client.send_data(1, b"\x00\x00\x00\x00\x01" + b"x" * 16_000)
        await stream.send_all(client.data_to_send())
        status = None
        with trio.fail_after(PATIENCE):
            while status is None:
                data = await stream.receive_some(65536)
                assert data, "the server closed the connection without an answer"
                for event in client.receive_data(data):
                    if isinstance(event, h2.events.TrailersReceived | h2.events.ResponseReceived):
                        status = dict(event.headers).get(b"grpc-status", status)
                await stream.send_all(client.data_to_send())
        await stream.aclose()
    assert status == b"13"
    assert dispatch.in_flight == 0


async def test_the_request_timeout_ends_a_call_whose_own_deadline_is_later() -> None:
    """``--request-timeout`` (here 0.5 s) ends a call with a later grpc-timeout (30 s) as
    UNAVAILABLE, under a ledger whose transaction holds it (a write that committed is
    answered); a call whose own deadline is sooner keeps it, with no ledger."""
    ledgers: list[bool] = []

    async def hang(request: BytesValue, call: Call) -> BytesValue:
        ledgers.append(current_ledger() is not None)
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def commit_late(request: BytesValue, call: Call) -> BytesValue:
        ledger = current_ledger()
        assert ledger is not None
        ledger.begin()  # a transaction, in flight past the deadline, that commits
        await trio.sleep(0.8)
        ledger.end(wrote=True)
        await trio.lowlevel.checkpoint()  # the deadline stays lifted after the commit
        return request

    methods = {"Hang": unary(hang), "CommitLate": unary(commit_late)}
    async with serving(methods, request_timeout=0.5) as (target, dispatch, _):
        overrun = await call(target, "Hang", b"")
        # Counted before its answer was sent.
        assert set(dispatch.counted[b"/test.Echo/Hang"].codes) == {Status.UNAVAILABLE}
        own_sooner = await call(target, "Hang", b"", timeout=0.3)
        committed, _ = await call(target, "CommitLate", b"written")
    assert overrun.code() == grpc.StatusCode.UNAVAILABLE
    assert overrun.details() == "the request did not finish within 0.5s"
    assert own_sooner.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert ledgers == [True, False]
    assert committed.value == b"written"
