"""bastion's own HTTP/1.1 server (llhttp over trio), over real sockets, hosting a small ASGI
application: keep-alive, pipelining, limits and timeouts, request smuggling shapes,
Expect: 100-continue, HEAD, chunked bodies, graceful drain."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
import trio
import trio.testing

from bastion.transports.http.server import HttpServer, ServerLimits, open_listeners

Message = dict[str, Any]


#: An answer larger than the socket buffers between server and client hold.
LARGE = bytes(range(256)) * (32 * 1024)


async def app(scope: Message, receive: Any, send: Any) -> None:
    """Echoes the request: method, path, query and the body it read. ``/slow`` sleeps
    first; ``/early`` answers without reading the body; ``/trickle`` sends its head and
    half its body, sleeps, then the rest; ``/large`` answers :data:`LARGE`."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    if scope["path"] != "/early":
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
    if scope["path"] == "/slow":
        await trio.sleep(0.5)
    if scope["path"] == "/large":
        answer = LARGE
    else:
        answer = json.dumps(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "body": body.decode(),
            }
        ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer)).encode()),
            ],
        }
    )
    if scope["path"] == "/trickle":
        half = len(answer) // 2
        await send({"type": "http.response.body", "body": answer[:half], "more_body": True})
        await trio.sleep(0.5)
        answer = answer[half:]
    await send({"type": "http.response.body", "body": answer})


LIMITS = ServerLimits(
    max_header_bytes=4096,
    max_body_bytes=1000,
    header_timeout=0.5,
    body_timeout=0.5,
    keep_alive_timeout=1.0,
    max_connections=50,
    shutdown_timeout=5.0,
)


class Site:
    """A running server, and the client connections a test opened to it (closed after)."""

    def __init__(self, port: int, stop: trio.Event) -> None:
        self.port, self.stop = port, stop
        self.opened: list[trio.SocketStream] = []

    async def connect(self) -> trio.SocketStream:
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        self.opened.append(stream)
        return stream


@asynccontextmanager
async def serving(limits: ServerLimits = LIMITS, application: Any = app) -> AsyncIterator[Site]:
    stop = trio.Event()
    listeners = await open_listeners("127.0.0.1", 0)
    site = Site(listeners[0].socket.getsockname()[1], stop)
    async with trio.open_nursery() as nursery:
        await nursery.start(HttpServer(application, limits).serve, listeners, stop)
        try:
            yield site
        finally:
            for stream in site.opened:
                await stream.aclose()
            stop.set()


async def read_response(
    stream: trio.SocketStream, buffer: bytearray
) -> tuple[int, dict[str, str], bytes]:
    """One response off ``stream`` (Content-Length framed); what follows stays in ``buffer``."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            raise EOFError(bytes(buffer))
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        data = await stream.receive_some(65536)
        if not data:
            raise EOFError
        rest += data
    buffer[:] = rest[length:]
    return status, headers, rest[:length]


async def closed(stream: trio.SocketStream) -> bool:
    with trio.move_on_after(3):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
        return True
    return False


def get(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


async def test_two_hundred_requests_on_one_keep_alive_connection() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        for n in range(200):
            await stream.send_all(get(f"/n?i={n}"))
            status, headers, body = await read_response(stream, buffer)
            assert status == 200
            assert json.loads(body)["query"] == f"i={n}"
            assert "date" in headers


async def test_an_answer_larger_than_the_socket_takes_arrives_whole_to_a_slow_reader() -> None:
    # time enough to read it all: the write limit bounds the whole of the rest
    async with serving(dataclasses.replace(LIMITS, body_timeout=10.0)) as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/large") + get("/after"))
        await trio.sleep(0.3)  # the server fills what the socket takes, then must wait
        status, _, body = await read_response(stream, buffer)
        assert status == 200
        assert body == LARGE
        assert json.loads((await read_response(stream, buffer))[2])["path"] == "/after"


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        post = b"POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
        await stream.send_all(get("/slow?i=1") + post + get("/a?i=3"))
        answers = [json.loads((await read_response(stream, buffer))[2]) for _ in range(3)]
        assert [a["path"] for a in answers] == ["/slow", "/p", "/a"]
        assert answers[1]["body"] == "hello"


async def test_a_chunked_body_is_read_whole() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(
            b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
        )
        status, _, body = await read_response(stream, buffer)
        assert status == 200
        assert json.loads(body)["body"] == "abcdefg"


@pytest.mark.parametrize(
    "request_bytes",
    [
        # Content-Length beside Transfer-Encoding: which one frames the body?
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\n",
        # two different Content-Lengths
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        # a folded header line (obs-fold)
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: one\r\n two\r\n\r\n",
        # lines ended by a bare LF
        b"GET / HTTP/1.1\nHost: t\n\n",
        b"GET / HTTP/1.1\r\nHost: t\nX-A: b\r\n\r\n",
        # not HTTP at all
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        # two Content-Lengths, even equal ones
        b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
        # no Host on HTTP/1.1, or two
        b"GET / HTTP/1.1\r\nX-A: b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n",
        # a header name that is no token, a control character in a value
        b"GET / HTTP/1.1\r\nHost: t\r\nX A: b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: t\r\nX-A: b\x00c\r\n\r\n",
        # a body on an Upgrade request: llhttp would take it for the next request
        b"POST / HTTP/1.1\r\nHost: t\r\nUpgrade: h2c\r\nConnection: upgrade\r\n"
        b"Content-Length: 3\r\n\r\nabc",
        # a chunk line ended by a bare LF
        b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
    ],
)
async def test_smuggling_shapes_get_400_and_a_closed_connection(request_bytes: bytes) -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(request_bytes + get("/after"))
        status, headers, _ = await read_response(stream, buffer)
        assert status == 400
        assert headers["connection"] == "close"
        assert await closed(stream)


async def test_a_transfer_coding_other_than_chunked_gets_501() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(
            b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
        )
        status, headers, _ = await read_response(stream, buffer)
        assert (status, headers["connection"]) == (501, "close")
        assert await closed(stream)


async def test_two_requests_in_one_write_are_answered_in_order_after_a_chunked_body() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(
            b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n" + get("/after")
        )
        answers = [json.loads((await read_response(stream, buffer))[2]) for _ in range(2)]
        assert [(a["path"], a["body"]) for a in answers] == [("/c", "abcde"), ("/after", "")]


async def test_an_upgrade_request_is_answered_as_any_other() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        upgrade = get("/up", extra="Upgrade: h2c\r\nConnection: Upgrade\r\n")
        await stream.send_all(upgrade + get("/n"))
        status, _, body = await read_response(stream, buffer)
        assert (status, json.loads(body)["path"]) == (200, "/up")
        status, _, body = await read_response(stream, buffer)
        assert (status, json.loads(body)["path"]) == (200, "/n")


async def test_http_1_0_is_answered_then_closed() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(b"GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        status, headers, body = await read_response(stream, buffer)
        assert (status, headers["connection"]) == (200, "close")
        assert json.loads(body)["path"] == "/old"
        assert await closed(stream)


async def trickle(stream: trio.SocketStream, piece: bytes) -> None:
    """``piece`` ten times, a read apart, until the server stops reading."""
    for _ in range(10):
        await trio.sleep(0.02)
        try:
            await stream.send_all(piece)
        except trio.BrokenResourceError:
            return


async def test_a_head_over_the_limit_in_pieces_gets_431() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(b"GET / HTTP/1.1\r\nHost: t\r\nX-Big: ")
        await trickle(stream, b"a" * 1000)
        # refused as it grows, not at its end (which never comes) nor by the time limit
        assert (await read_response(stream, buffer))[0] == 431


async def test_chunk_framing_beyond_the_body_is_bounded() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1;")
        await trickle(stream, b"x" * 1000)  # a chunk extension that never ends
        assert (await read_response(stream, buffer))[0] == 400


async def test_a_head_over_the_limit_gets_431() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/", extra="X-Big: " + "a" * 5000 + "\r\n"))
        status, _, _ = await read_response(stream, buffer)
        assert status == 431
        assert await closed(stream)


async def test_a_body_over_the_limit_gets_413() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(
            b"POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"".join(b"64\r\n" + b"x" * 100 + b"\r\n" for _ in range(11))
        )
        status, _, _ = await read_response(stream, buffer)
        assert status == 413
        assert await closed(stream)


async def test_slow_clients_are_cut_and_do_not_starve_others() -> None:
    async with serving() as site:
        # A handful holding a half-sent head, and one holding a half-sent body.
        slow = [await site.connect() for _ in range(5)]
        for stream in slow:
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: t\r\n")
        body_slow = await site.connect()
        await body_slow.send_all(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
        # Meanwhile others are served at once.
        fast, buffer = await site.connect(), bytearray()
        with trio.fail_after(0.4):
            await fast.send_all(get("/fast"))
            assert (await read_response(fast, buffer))[0] == 200
        for stream in slow:
            status, _, _ = await read_response(stream, bytearray())
            assert status == 408
            assert await closed(stream)
        assert await closed(body_slow)


async def test_an_idle_keep_alive_connection_is_closed() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/"))
        assert (await read_response(stream, buffer))[0] == 200
        started = trio.current_time()
        assert await closed(stream)
        assert trio.current_time() - started >= LIMITS.keep_alive_timeout - 0.1


async def test_expect_100_continue_is_answered_before_the_body() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(
            b"POST /e HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n"
        )
        with trio.fail_after(2):
            while b"\r\n\r\n" not in buffer:
                buffer += await stream.receive_some(65536)
        assert bytes(buffer).startswith(b"HTTP/1.1 100 ")
        del buffer[: bytes(buffer).index(b"\r\n\r\n") + 4]
        await stream.send_all(b"body")
        status, _, body = await read_response(stream, buffer)
        assert status == 200
        assert json.loads(body)["body"] == "body"


async def test_an_answer_before_the_body_closes_a_connection_still_owing_it() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(b"POST /early HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\nab")
        status, _, _ = await read_response(stream, buffer)
        assert status == 200
        assert await closed(stream)


async def test_head_answers_carry_no_body() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(b"HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n" + get("/next"))
        with trio.fail_after(2):
            while bytes(buffer).count(b"\r\n\r\n") < 2:
                buffer += await stream.receive_some(65536)
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        # The HEAD answer keeps the Content-Length a GET would have, but no body follows:
        # the next response starts right after its head.
        assert b"content-length: " in head.lower()
        assert not head.lower().endswith(b"content-length: 0")
        assert rest.startswith(b"HTTP/1.1 200 ")


async def test_a_stop_finishes_requests_in_flight_and_refuses_new_connections() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        idle, idle_buffer = await site.connect(), bytearray()
        await idle.send_all(get("/"))
        assert (await read_response(idle, idle_buffer))[0] == 200
        await stream.send_all(get("/slow"))
        await trio.sleep(0.1)
        site.stop.set()
        await trio.sleep(0.1)
        with pytest.raises(OSError, match="onnect"):
            await site.connect()
        assert await closed(idle)
        status, _, body = await read_response(stream, buffer)
        assert status == 200
        assert json.loads(body)["path"] == "/slow"
        assert await closed(stream)


async def test_a_stop_serves_the_connections_waiting_in_the_listen_backlog() -> None:
    async with serving(replace(LIMITS, max_connections=1)) as site:
        holder, holder_buffer = await site.connect(), bytearray()
        await holder.send_all(get("/"))
        assert (await read_response(holder, holder_buffer))[0] == 200
        # The one slot is taken: the kernel completes this connection, the server does not
        # accept it.
        queued, buffer = await site.connect(), bytearray()
        await queued.send_all(get("/queued"))
        site.stop.set()
        status, headers, body = await read_response(queued, buffer)
        assert (status, headers["connection"]) == (200, "close")
        assert json.loads(body)["path"] == "/queued"
        assert await closed(queued)


async def test_an_answer_begun_after_a_stop_says_connection_close() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/slow"))
        await trio.testing.wait_all_tasks_blocked()
        site.stop.set()
        status, headers, _ = await read_response(stream, buffer)
        assert (status, headers["connection"]) == (200, "close")
        assert await closed(stream)


async def test_a_request_right_after_an_answer_the_stop_found_under_way_is_answered() -> None:
    async with serving() as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/trickle"))
        while b"{" not in buffer:  # the head and the first half of the body are out
            buffer += await stream.receive_some(65536)
        site.stop.set()
        status, headers, _ = await read_response(stream, buffer)
        assert (status, headers.get("connection")) == (200, None)
        await stream.send_all(get("/next"))
        status, headers, body = await read_response(stream, buffer)
        assert (status, headers["connection"]) == (200, "close")
        assert json.loads(body)["path"] == "/next"
        assert await closed(stream)


async def test_an_idle_connection_is_answered_within_the_stop_grace_then_closed() -> None:
    async with serving(replace(LIMITS, keep_alive_timeout=60.0)) as site:
        late, late_buffer = await site.connect(), bytearray()
        idle, idle_buffer = await site.connect(), bytearray()
        for stream, buffer in ((late, late_buffer), (idle, idle_buffer)):
            await stream.send_all(get("/"))
            assert (await read_response(stream, buffer))[0] == 200
        site.stop.set()
        await trio.testing.wait_all_tasks_blocked()
        await late.send_all(get("/late"))
        status, headers, body = await read_response(late, late_buffer)
        assert (status, headers["connection"]) == (200, "close")
        assert json.loads(body)["path"] == "/late"
        assert await closed(late)
        assert await closed(idle)  # by the grace: its keep-alive wait is a minute


async def test_the_status_line_carries_its_reason_phrase() -> None:
    async with serving() as site:
        stream, data = await site.connect(), b""
        await stream.send_all(get("/"))
        with trio.fail_after(2):
            while b"\r\n" not in data:
                data += await stream.receive_some(65536)
        assert data.startswith(b"HTTP/1.1 200 OK\r\n")


#: Response headers no client may receive: each would split the head or change its
#: meaning (exchange.py checks most header lines, the protocol the framing ones).
BAD_HEADERS = [
    (b"x-a", b"one\r\nset-cookie: planted=1"),
    (b"x-a", b"one\nset-cookie: planted=1"),
    (b"x-a", b"one\rset-cookie: planted=1"),
    (b"x-a\r\nset-cookie", b"planted=1"),
    (b"set-cookie: planted", b"1"),
    (b"x-a b", b"planted"),
    (b"", b"planted"),
    (b"x-a", b" planted"),
    (b"x-a", b"planted\t"),
    (b"x-a", b"plan\x00ted"),
    (b"x-a", b"plan\x7fted"),
    (b"content-length", b"2\r\nset-cookie: planted=1"),
    (b"connection", b"close\r\nset-cookie: planted=1"),
]


async def answer_with(scope: Message, receive: Any, send: Any) -> None:
    """Answers ``/bad/<i>`` with :data:`BAD_HEADERS` ``[i]`` among good headers; ``/good``
    with a spread of valid ones; ``/stream`` with no Content-Length; ``/close`` saying
    ``Connection: close`` itself."""
    if scope["type"] != "http":
        raise ValueError("no lifespan")
    path = scope["path"]
    headers = [(b"content-type", b"text/plain"), (b"content-length", b"2")]
    if path.startswith("/bad/"):
        headers.append(BAD_HEADERS[int(path.removeprefix("/bad/"))])
    elif path == "/good":
        headers += [(b"X-Mixed-Case", b"a b\tc: d"), (b"x-empty", b""), (b"x-high", b"\xe9t\xe9")]
    elif path == "/stream":
        headers = [(b"content-type", b"text/plain")]
    elif path == "/close":
        headers.append((b"Connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize("index", range(len(BAD_HEADERS)))
async def test_a_malformed_response_header_never_reaches_the_wire(index: int) -> None:
    async with serving(application=answer_with) as site:
        stream, data = await site.connect(), b""
        await stream.send_all(get(f"/bad/{index}"))
        with trio.fail_after(3):
            while chunk := await stream.receive_some(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 500 ")
        assert b"planted" not in data
        assert b"text/plain; charset=utf-8" in data  # the server's own answer


async def test_response_headers_arrive_as_given_and_the_server_frames_the_body() -> None:
    async with serving(application=answer_with) as site:
        stream, buffer = await site.connect(), bytearray()
        await stream.send_all(get("/good"))
        with trio.fail_after(3):
            while not buffer.endswith(b"\r\n\r\nok"):
                buffer += await stream.receive_some(65536)
        head = bytes(buffer).partition(b"\r\n\r\n")[0]
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        for line in (b"x-mixed-case: a b\tc: d", b"x-empty: ", b"x-high: \xe9t\xe9", b"date: "):
            assert b"\r\n" + line in head
        assert b"content-length: 2" in head
        assert b"connection" not in head
        buffer.clear()
        # No Content-Length: the server frames the body in chunks, the connection stays open.
        await stream.send_all(get("/stream"))
        with trio.fail_after(3):
            while not buffer.endswith(b"0\r\n\r\n"):
                buffer += await stream.receive_some(65536)
        head, _, chunks = bytes(buffer).partition(b"\r\n\r\n")
        assert b"\r\ntransfer-encoding: chunked" in head.lower()
        assert chunks == b"2\r\nok\r\n0\r\n\r\n"
        buffer.clear()
        # The application's own Connection: close is the server's cue to close after it.
        await stream.send_all(get("/close"))
        status, headers, body = await read_response(stream, buffer)
        assert (status, headers["connection"], body) == (200, "close", b"ok")
        assert await closed(stream)
