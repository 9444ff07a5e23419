"""The server's HTTP/1.1 state machine, without sockets: what it hands out of a request
and when, and how it frames a response."""

from __future__ import annotations

import pytest

from bastion.transports.http.protocol import (
    DONE,
    MUST_CLOSE,
    NEED_DATA,
    SEND_BODY,
    Data,
    EndOfMessage,
    InformationalResponse,
    LocalProtocolError,
    Request,
    Response,
    ServerConnection,
    Signal,
)


def request(raw: bytes) -> tuple[ServerConnection, Request]:
    conn = ServerConnection(4096)
    conn.receive_data(raw)
    event = conn.next_event()
    assert isinstance(event, Request)
    return conn, event


def answer(conn: ServerConnection, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    return b"".join(
        [conn.send(Response(200, headers, b"OK")), conn.send(Data(body)), conn.send(EndOfMessage())]
    )


def test_a_pipelined_request_waits_for_the_next_cycle() -> None:
    conn, first = request(b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
    assert (first.method, first.target, first.headers) == (b"GET", b"/a", [(b"host", b"t")])
    assert conn.next_event() == EndOfMessage()
    assert conn.next_event() is Signal.PAUSED
    answer(conn, [(b"content-length", b"2")], b"ok")
    conn.start_next_cycle()
    second = conn.next_event()
    assert isinstance(second, Request)
    assert second.target == b"/b"
    assert conn.next_event() == EndOfMessage()
    answer(conn, [(b"content-length", b"2")], b"ok")
    conn.start_next_cycle()
    assert conn.next_event() is NEED_DATA


def test_a_body_in_pieces_then_the_end() -> None:
    conn, _ = request(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nab")
    assert conn.their_state is SEND_BODY
    assert conn.next_event() == Data(b"ab")
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"cde")
    assert conn.next_event() == Data(b"cde")
    assert conn.next_event() == EndOfMessage()
    assert conn.their_state is DONE


def test_expect_100_continue_until_the_interim_answer() -> None:
    conn, _ = request(
        b"POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n"
    )
    assert conn.they_are_waiting_for_100_continue
    assert conn.send(InformationalResponse(100)) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert not conn.they_are_waiting_for_100_continue


def test_no_length_is_chunked_for_http_1_1() -> None:
    conn, _ = request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    wire = answer(conn, [], b"ok")
    assert wire.endswith(b"transfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")


def test_no_length_ends_with_the_connection_for_http_1_0() -> None:
    conn, _ = request(b"GET / HTTP/1.0\r\n\r\n")
    wire = answer(conn, [], b"ok")
    assert wire.endswith(b"\r\nconnection: close\r\n\r\nok")
    assert conn.our_state is MUST_CLOSE


@pytest.mark.parametrize(
    ("raw", "status"),
    [(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", 200), (b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", 204)],
)
def test_head_204_and_304_answers_carry_no_body(raw: bytes, status: int) -> None:
    conn, _ = request(raw)
    conn.send(Response(status, [(b"content-length", b"2")]))
    with pytest.raises(LocalProtocolError):
        conn.send(Data(b"ok"))


def test_the_content_length_is_held_to() -> None:
    conn, _ = request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    conn.send(Response(200, [(b"content-length", b"2")]))
    conn.send(Data(b"o"))
    with pytest.raises(LocalProtocolError):
        conn.send(EndOfMessage())
    conn, _ = request(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    conn.send(Response(200, [(b"content-length", b"2")]))
    with pytest.raises(LocalProtocolError):
        conn.send(Data(b"oops"))


def test_connection_close_from_the_client_closes_after_the_answer() -> None:
    conn, _ = request(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert conn.next_event() == EndOfMessage()
    wire = answer(conn, [(b"content-length", b"2")], b"ok")
    assert b"\r\nconnection: close\r\n" in wire
    assert (conn.our_state, conn.their_state) == (MUST_CLOSE, MUST_CLOSE)
    with pytest.raises(LocalProtocolError):
        conn.start_next_cycle()
