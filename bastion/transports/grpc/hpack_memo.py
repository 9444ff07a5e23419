"""HPACK that remembers: a header block met again on an unchanged table is not worked out
again.

A gRPC client sends the same headers on every call of a connection, and after its first
call they are indexed in the table, so the block is the same bytes each time; this
server's reply headers and trailers are the same few lists, encoded to the same bytes.
Decoding and encoding them was 5-6% of a unary call's CPU (py-spy, h2load). HPACK's
result depends on the block (or the headers) and on the table, so an answer is
remembered only when working it out left the table as it was, and every answer is
forgotten as soon as the table changes (an entry added or evicted, a new size, a new
limit): what comes from memory is what the full work would give.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from h2.connection import H2Connection
from hpack import Decoder, Encoder
from hpack.table import HeaderTable

__all__ = ["RememberingDecoder", "RememberingEncoder", "remembering"]

#: Blocks (or header lists) remembered per connection; past it, memory starts afresh.
KEPT = 32
#: Longest block remembered (a larger one is rare, and worked out each time).
LONGEST = 1024


def _table_state(table: HeaderTable) -> tuple[int, int, int, object]:
    """What tells one state of the table from another. The newest entry is told by its
    identity (an entry equal to it may be added while another is evicted): the state
    holds the entry itself, so while a state is kept its id cannot be reused, and any
    addition puts a new tuple first. Evictions follow an addition or a new size."""
    entries = table.dynamic_entries
    newest = entries[0] if entries else None
    return table.maxsize, len(entries), id(newest), newest


class _Memory:
    __slots__ = ("answers", "state")

    def __init__(self) -> None:
        self.answers: dict[Hashable, Any] = {}
        self.state: Hashable = None

    def valid_for(self, state: Hashable) -> dict[Hashable, Any]:
        if state != self.state:
            self.answers.clear()
            self.state = state
        return self.answers

    def keep(self, key: Hashable, answer: object, before: Hashable, after: Hashable) -> None:
        if after != before:
            self.answers.clear()
            self.state = after
            return
        if len(self.answers) >= KEPT:
            self.answers.clear()
        self.answers[key] = answer


class RememberingDecoder(Decoder):
    """h2's decoder (``H2Connection.decoder``), which asks for raw bytes headers."""

    def __init__(self) -> None:
        super().__init__()
        self._memory = _Memory()

    def _state(self) -> Hashable:
        limits = self.max_allowed_table_size, self.max_header_list_size
        return _table_state(self.header_table), limits

    def decode(self, data: bytes, raw: bool = False) -> Any:
        if not raw or type(data) is not bytes or len(data) > LONGEST:
            return super().decode(data, raw)
        before = self._state()
        known = self._memory.valid_for(before).get(data)
        if known is not None:
            return list(known)
        headers = super().decode(data, raw)
        self._memory.keep(data, tuple(headers), before, self._state())
        return headers


class RememberingEncoder(Encoder):
    """h2's encoder (``H2Connection.encoder``). Only lists of plain two-tuples are
    remembered: a ``NeverIndexedHeaderTuple`` compares equal to the plain tuple, but must
    be encoded otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self._memory = _Memory()

    def _state(self) -> Hashable:
        return _table_state(self.header_table), len(self.table_size_changes)

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        if not isinstance(headers, list) or any(
            type(h) is not tuple or len(h) != 2 for h in headers
        ):
            return super().encode(headers, huffman)
        key = (huffman, *headers)
        before = self._state()
        known: bytes | None = self._memory.valid_for(before).get(key)
        if known is not None:
            return known
        block = super().encode(headers, huffman)
        if len(block) <= LONGEST:
            self._memory.keep(key, block, before, self._state())
        return block


def remembering(connection: H2Connection) -> H2Connection:
    """``connection`` (new, nothing received or sent yet) with remembering codecs, under
    the limits h2 gave its own."""
    decoder = RememberingDecoder()
    decoder.max_header_list_size = connection.decoder.max_header_list_size
    decoder.max_allowed_table_size = connection.decoder.max_allowed_table_size
    connection.decoder = decoder
    connection.encoder = RememberingEncoder()
    return connection
