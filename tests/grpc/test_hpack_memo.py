"""The remembering HPACK codecs give, block for block, what hpack's own give: through
repeats, additions, evictions, a new table size, and the one case an equality test would
miss (an entry equal to the newest added while the oldest is evicted)."""

from __future__ import annotations

import random

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from hpack import Decoder, Encoder, NeverIndexedHeaderTuple

from bastion.transports.grpc.hpack_memo import (
    RememberingDecoder,
    RememberingEncoder,
    remembering,
)

CALL = [
    (b":method", b"POST"),
    (b":scheme", b"http"),
    (b":path", b"/authorizer.v1.AuthorizerService/ValidateJwtToken"),
    (b":authority", b"127.0.0.1:9000"),
    (b"content-type", b"application/grpc"),
    (b"te", b"trailers"),
    (b"user-agent", b"grpc-python/1.0"),
]


def _lists(seed: int) -> list[list[tuple[bytes, bytes]]]:
    """Header lists that repeat (as a client's calls do) and change (a header's value,
    a new header), often enough to add and evict entries of a small table."""
    rng = random.Random(seed)
    made: list[list[tuple[bytes, bytes]]] = []
    for _ in range(400):
        headers = list(CALL)
        if rng.random() < 0.3:
            headers.append((b"x-request-id", b"r%d" % rng.randrange(6)))
        if rng.random() < 0.1:
            headers.append((b"authorization", b"Bearer " + b"t" * rng.randrange(1, 90)))
        made.append(headers)
    return made


@pytest.mark.parametrize("table_size", [4096, 256, 120])
def test_the_same_blocks_and_headers_as_hpack(table_size: int) -> None:
    plain_out, memo_out = Encoder(), RememberingEncoder()
    plain_in, memo_in = Decoder(), RememberingDecoder()
    for coder in (plain_out, memo_out, plain_in, memo_in):
        coder.header_table_size = table_size
    for step, headers in enumerate(_lists(table_size)):
        if step == 200:  # the peer's settings shrink the table mid-connection
            for coder in (plain_out, memo_out, plain_in, memo_in):
                coder.header_table_size = table_size // 2
        block = plain_out.encode(headers)
        assert memo_out.encode(headers) == block, step
        assert memo_in.decode(block, raw=True) == plain_in.decode(block, raw=True), step
        assert list(memo_in.header_table.dynamic_entries) == list(
            plain_in.header_table.dynamic_entries
        )


def test_a_call_sent_again_is_answered_from_memory() -> None:
    encoder, decoder = RememberingEncoder(), RememberingDecoder()
    first = encoder.encode(CALL)  # adds the headers to the table
    decoder.decode(first, raw=True)
    again = encoder.encode(CALL)  # all indexed now: the table stays as it is
    assert decoder.decode(again, raw=True) == CALL
    assert encoder._memory.answers
    assert decoder._memory.answers
    assert encoder.encode(CALL) == again
    assert decoder.decode(again, raw=True) == CALL


def _added(name: bytes, value: bytes) -> bytes:
    """A literal field with incremental indexing, new name, no Huffman (RFC 7541 6.2.1)."""
    return bytes([0x40, len(name)]) + name + bytes([len(value)]) + value


def test_an_equal_entry_added_as_the_others_are_evicted() -> None:
    """A table that holds two entries, [b: 2, a: 1]. One block adds c: 9 then b: 2, which
    evicts both: [b: 2, c: 9], the same length and a newest entry of the same value. The
    memory must not take the table for unchanged: the block that named a: 1 by its index
    now names c: 9."""
    plain, memo = Decoder(), RememberingDecoder()
    second = bytes([0x80 | 63])  # indexed: the second dynamic entry (the static table has 61)
    blocks = [
        _added(b"a", b"1"),
        _added(b"b", b"2"),
        second,
        second,
        _added(b"c", b"9") + _added(b"b", b"2"),
        second,
    ]
    answers = []
    for decoder in (plain, memo):
        decoder.header_table_size = 2 * (32 + 2)  # room for two one-byte names and values
        answers.append([decoder.decode(block, raw=True) for block in blocks])
    assert answers[0][-1] == [(b"c", b"9")]
    assert answers[1] == answers[0]


def test_never_indexed_headers_are_not_taken_for_plain_ones() -> None:
    memo, plain = RememberingEncoder(), Encoder()
    secret = [(b"authorization", b"Bearer abc")]
    for headers in (secret, secret, [NeverIndexedHeaderTuple(*secret[0])], secret):
        assert memo.encode(headers) == plain.encode(headers)


def test_a_new_connection_keeps_h2s_limits() -> None:
    made = H2Connection(H2Configuration(client_side=False))
    limits = made.decoder.max_header_list_size, made.decoder.max_allowed_table_size
    connection = remembering(made)
    assert isinstance(connection.decoder, RememberingDecoder)
    assert isinstance(connection.encoder, RememberingEncoder)
    assert (connection.decoder.max_header_list_size, connection.decoder.max_allowed_table_size) == (
        limits
    )
