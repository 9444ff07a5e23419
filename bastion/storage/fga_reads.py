"""The engine's reads of a store on demand: its head (revision, latest model) and batches
of tuple reads, each the question of one :class:`~core.fga.tuples.TupleReader` method.

A batch is what one round of an evaluation missed (:mod:`core.fga.on_demand`); its reads
are grouped by method and each group is one indexed query, shaped as OpenFGA's
datastore asks:

- ``read_exact(object, relation, user)``: by the tuple's key hash, the store's unique
  index (``uq_service_fga_tuples_store_key``);
- ``read(object, relation)``: by ``(object, relation)``
  (``ix_service_fga_tuples_object_relation``);
- ``read_usersets(object, relation)``: the tuples whose user is a userset, from an index
  of those alone (``ix_service_fga_tuples_usersets``, partial where the database has
  partial indexes, migration 0011): a group's millions of direct members are not walked;
- ``read_by_user(user, object_type)``: by ``(user, object_type)``, the reverse walks of
  ListObjects (``ix_service_fga_tuples_user_object_type``).

The store's revision is read first, in the same call: the answers are at least that
recent (a replica's answers are then checked against the process's floor, see
:mod:`storage.fga_replica`). Each answer lists its tuples in the order they were
written, as the in-memory reader does.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.storage.sql.schema import fga_tuples

__all__ = [
    "USERSETS",
    "Fetched",
    "Head",
    "Read",
    "fetch_memory",
    "fetch_sql",
    "key_from_row",
    "key_hash",
]

#: ``(method, *arguments)`` of a :class:`~core.fga.tuples.TupleReader` method.
Read = tuple[str, ...]
#: Rows per ``IN`` list.
_CHUNK = 500
#: A userset user (``type:id#relation``): the partial index's predicate, word for word
#: (a literal, not a parameter: the planner must see that it implies the index's).
USERSETS = fga_tuples.c.user.like(sa.literal_column("'%#%'"))


@dataclass(frozen=True, slots=True)
class Head:
    revision: int
    model: Any  # StoredModel (storage.fga imports this module)


@dataclass(frozen=True, slots=True)
class Fetched:
    """Answers in the order of the reads, as of at least ``revision``."""

    revision: int
    answers: Sequence[tuple[TupleKey, ...]]


_COLUMNS = (
    fga_tuples.c.id,
    fga_tuples.c.object,
    fga_tuples.c.relation,
    fga_tuples.c.user,
    fga_tuples.c.object_type,
    fga_tuples.c.condition_name,
    fga_tuples.c.condition_context,
)


def key_hash(key: TupleKey) -> str:
    """The tuple's identity in its store (``object#relation@user``, hashed)."""
    return hashlib.sha256(str(key).encode()).hexdigest()


def key_from_row(row: Any) -> TupleKey:
    context = json.loads(row.condition_context) if row.condition_context else None
    # Interned: a user, a relation name or an object recurs across many tuples and
    # cached answers (a third less memory for a million tuples).
    return TupleKey(
        sys.intern(row.object),
        sys.intern(row.relation),
        sys.intern(row.user),
        row.condition_name or "",
        context,
    )


def _chunks(items: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def _rows(conn: sa.Connection, store_id: str, where: sa.ColumnElement[bool]) -> list[Any]:
    query = sa.select(*_COLUMNS).where(fga_tuples.c.store_id == store_id, where)
    return list(conn.execute(query))


def fetch_sql(
    conn: sa.Connection,
    store_id: str,
    reads: Sequence[Read],
    revision: int,
) -> Fetched:
    """``reads`` answered from SQL on ``conn``; ``revision`` read just before."""
    t = fga_tuples.c
    by_method: dict[str, list[Read]] = defaultdict(list)
    for read in reads:
        by_method[read[0]].append(read)
    found: dict[Read, list[Any]] = {read: [] for read in reads}
    exact = {key_hash(TupleKey(r[1], r[2], r[3])): r for r in by_method["read_exact"]}
    for chunk in _chunks(list(exact)):
        for row in _rows(conn, store_id, t.key_hash.in_(chunk)):
            found[exact[key_hash(TupleKey(row.object, row.relation, row.user))]].append(row)
    for method, columns, extra in (
        ("read", (t.object, t.relation), None),
        ("read_usersets", (t.object, t.relation), USERSETS),
        ("read_by_user", (t.user, t.object_type), None),
    ):
        for chunk in _chunks([read[1:] for read in by_method[method]]):
            where: sa.ColumnElement[bool] = (
                sa.and_(columns[0] == chunk[0][0], columns[1] == chunk[0][1])
                if len(chunk) == 1
                else sa.tuple_(*columns).in_(chunk)
            )
            if extra is not None:
                where = sa.and_(where, extra)
            for row in _rows(conn, store_id, where):
                pair = (
                    (row.object, row.relation)
                    if method != "read_by_user"
                    else (
                        row.user,
                        row.object_type,
                    )
                )
                found[(method, *pair)].append(row)
    return Fetched(
        revision,
        [
            tuple(key_from_row(row) for row in sorted(found[read], key=lambda r: r.id))
            for read in reads
        ],
    )


def fetch_memory(index: MemoryTupleReader, reads: Sequence[Read], revision: int) -> Fetched:
    """``reads`` answered by an in-memory index (``--fga-store memory``)."""
    answers = []
    for method, *args in reads:
        answers.append(tuple(getattr(index, method)(*args)))
    return Fetched(revision, answers)
