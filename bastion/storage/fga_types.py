"""The authorization store's values: model versions, changes, filters, pages, the
errors of a write, and the continuation tokens of a read (:mod:`storage.fga`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass

from bastion.core.fga.tuples import TupleKey

__all__ = [
    "MAX_POSITION",
    "MAX_REPLAY",
    "Change",
    "StoreNotEmpty",
    "StoredModel",
    "TupleConflict",
    "TupleFilter",
    "TuplePage",
    "WriteOptions",
    "decode_token",
    "encode_token",
]

#: A process further behind than this many changes starts its cache over instead of replaying.
MAX_REPLAY = 10_000


@dataclass(frozen=True, slots=True)
class StoredModel:
    id: str
    dsl: str


@dataclass(frozen=True, slots=True)
class Change:
    """One changelog row: ``operation`` is ``write``, ``delete``, ``model`` or ``reset``."""

    revision: int
    operation: str
    key: TupleKey | None = None
    model: StoredModel | None = None
    #: Unix seconds; OpenFGA's ``/changes`` shows it.
    created_at: int = 0


@dataclass(frozen=True, slots=True)
class TupleFilter:
    """Read filters; each empty part matches anything. ``object`` may be ``type:`` alone."""

    user: str = ""
    relation: str = ""
    object: str = ""


@dataclass(frozen=True, slots=True)
class TuplePage:
    tuples: Sequence[TupleKey]
    #: Opaque; empty when there is nothing more.
    continuation_token: str
    #: When each tuple was written (Unix seconds), in the order of ``tuples``.
    written_at: Sequence[int] = ()


class TupleConflict(Exception):
    """A write of an existing tuple (``exists``) or a delete of a missing one."""

    def __init__(self, key: TupleKey, *, exists: bool) -> None:
        super().__init__(str(key))
        self.key = key
        self.exists = exists


class StoreNotEmpty(Exception):
    """Reset refused: tuples remain."""


#: The largest position a token may name: SQL's 64-bit ``bigint``.
MAX_POSITION = 2**63 - 1


def encode_token(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode()


def decode_token(token: str) -> int:
    """The position a token names; raises ``ValueError`` for anything we did not issue."""
    try:
        value = int(base64.urlsafe_b64decode(token.encode()).decode())
    except (binascii.Error, UnicodeError, ValueError):
        raise ValueError("invalid continuation token") from None
    if not 0 <= value <= MAX_POSITION:  # a position past bigint overflows every database
        raise ValueError("invalid continuation token")
    return value


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """OpenFGA's ``on_duplicate: ignore`` / ``on_missing: ignore``: skip instead of failing."""

    #: Skip a write of a tuple stored as it is (the same condition and context).
    ignore_existing: bool = False
    ignore_missing: bool = False
