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
  partial indexes, migration 0013): a group's millions of direct members are not walked;
- ``read_by_user(user, object_type)``: by ``(user, object_type)``, the reverse walks of
  ListObjects (``ix_service_fga_tuples_user_object_type``); the types a round asks of
  one user are one probe (``object_type = ANY``): a folder asked for its child folders
  and its documents is one index range, not two (a third less statement time for a
  cold ListObjects' 58,000 reads);
- ``read_object(object, limit)``: the first ``limit + 1`` tuples of each object, by
  ``(object, relation)``'s first column; on PostgreSQL one ``LATERAL`` index range per
  object that stops at the limit (a group of millions of members costs ``limit + 1``
  rows), elsewhere numbered per object (``ROW_NUMBER``) and cut.

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
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.storage.fga_types import StoredModel
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
#: Values per ``IN`` list; per PostgreSQL array.
_CHUNK = 500
_ARRAY = 5000
#: Values from which an array goes out as one text (:func:`_text_array`).
_SPLIT_FROM = 1000
#: A userset user (``type:id#relation``): the partial index's predicate, word for word
#: (a literal, not a parameter: the planner must see that it implies the index's).
USERSETS = fga_tuples.c.user.like(sa.literal_column("'%#%'"))


@dataclass(frozen=True, slots=True)
class Head:
    revision: int
    model: StoredModel | None


@dataclass(frozen=True, slots=True)
class Fetched:
    """Answers in the order of the reads, as of at least ``revision``."""

    revision: int
    answers: Sequence[tuple[TupleKey, ...]]


_COLUMNS = (
    fga_tuples.c.id,
    fga_tuples.c.key_hash,
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
    return _key(row.object, row.relation, row.user, row.condition_name, row.condition_context)


def _key(
    obj: str, relation: str, user: str, condition: str | None, context: str | None
) -> TupleKey:
    """A stored tuple's columns as its key. Interned: a user, a relation name or an object
    recurs across many tuples and cached answers (a third less memory for a million)."""
    intern = sys.intern
    return TupleKey(
        intern(obj),
        intern(relation),
        intern(user),
        condition or "",
        json.loads(context) if context else None,
    )


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _among(conn: sa.Connection, column: sa.ColumnElement[str], values: list[str]) -> Any:
    """``column`` is one of ``values``: on PostgreSQL ``= ANY(array)``, one parameter (the
    statement's text, hence its plan, the same whatever the count); elsewhere ``IN``."""
    if conn.dialect.name == "postgresql":
        return column == sa.any_(_text_array(values))
    return column.in_(values)


def _text_array(values: list[str]) -> sa.ColumnElement[Any]:
    """A PostgreSQL array of ``values``. A large one is sent as one text of them a line
    each and split by the server, when no value holds a line end or is empty (ids never
    do): the driver then writes one string, not an array literal whose every element it
    scans for quoting (a fifth of a cold ListObjects' largest fetch, 65,536 reads). A
    small one (a check's few reads) stays an array parameter, which PostgreSQL plans
    better (0.15-0.25 ms less a fetch of two reads, bench/RESULTS.md)."""
    if len(values) >= _SPLIT_FROM:
        joined = "\n".join(values)
        if joined.count("\n") == len(values) - 1 and all(values):
            split = sa.func.string_to_array(sa.literal(joined, sa.Text()), sa.literal("\n"))
            return sa.cast(split, postgresql.ARRAY(sa.String()))
    return sa.literal(values, postgresql.ARRAY(sa.String()))


def _one_of(t: Any, types: tuple[str, ...]) -> sa.ColumnElement[bool]:
    """The object type is one of ``types`` (literals: a round asks of few)."""
    return t.object_type == types[0] if len(types) == 1 else t.object_type.in_(types)


def fetch_sql(
    conn: sa.Connection,
    store_id: str,
    reads: Sequence[Read],
    revision: int,
) -> Fetched:
    """``reads`` answered from SQL on ``conn``; ``revision`` read just before.

    Each method's reads are asked by their first argument among many, the second one
    fixed (the relation or object type: a round asks few), so each part is one index
    range per value of the composite index; the parts go out as one statement
    (``UNION ALL``, each row tagged with its part): one round trip for the batch.
    """
    t = fga_tuples.c
    size = _ARRAY if conn.dialect.name == "postgresql" else _CHUNK
    #: The rows of each read that has some (a cold ListObjects asks tens of thousands of
    #: reads, most of them answered by nothing).
    found: dict[Read, list[Any]] = {}
    #: (method, second argument) of each part, by the part's number.
    parts: list[tuple[str, str]] = []
    selects: list[sa.Select[Any]] = []

    def part(method: str, second: str, where: sa.ColumnElement[bool]) -> None:
        tag = sa.literal(len(parts), sa.Integer()).label("part")
        selects.append(sa.select(*_COLUMNS, tag).where(t.store_id == store_id, where))
        parts.append((method, second))

    exact = {key_hash(TupleKey(r[1], r[2], r[3])): r for r in reads if r[0] == "read_exact"}
    for chunk in _chunks(list(exact), size):
        part("read_exact", "", _among(conn, t.key_hash, chunk))
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    types_by_user: dict[str, set[str]] = defaultdict(set)
    for read in reads:
        if read[0] == "read_by_user":
            types_by_user[read[1]].add(read[2])
        elif read[0] != "read_exact":
            groups[(read[0], read[2])].append(read[1])
    users_by_types: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for user, types in types_by_user.items():
        users_by_types[tuple(sorted(types))].append(user)
    for types, users in users_by_types.items():
        for chunk in _chunks(users, size):
            # The row's own type tells which read it answers (the part's "second": "").
            part("read_by_user", "", sa.and_(_among(conn, t.user, chunk), _one_of(t, types)))
    for (method, second), firsts in groups.items():
        if method == "read_object":
            for chunk in _chunks(firsts, size):
                selects.append(_whole_objects(conn, store_id, chunk, int(second), len(parts)))
                parts.append((method, second))
            continue
        for chunk in _chunks(firsts, size):
            where = sa.and_(_among(conn, t.object, chunk), t.relation == second)
            part(method, second, sa.and_(where, USERSETS) if method == "read_usersets" else where)
    if selects:
        statement = selects[0] if len(selects) == 1 else sa.union_all(*selects)
        # Fetched at once, read by position (a row's named fields cost more than the
        # rest of the row's way here).
        for row in conn.execute(statement).all():
            method, second = parts[row[_PART]]
            if method == "read_exact":
                read = exact[row[_HASH]]
            elif method == "read_by_user":
                read = (method, row[_USER], row[_TYPE])
            else:
                read = (method, row[_OBJECT], second)
            rows = found.get(read)
            if rows is None:
                found[read] = [row]
            else:
                rows.append(row)
    answered = found.get
    return Fetched(
        revision, [() if (rows := answered(read)) is None else _answer(rows) for read in reads]
    )


_ID, _HASH, _OBJECT, _RELATION, _USER, _TYPE, _CONDITION, _CONTEXT, _PART = range(9)


def _answer(rows: list[Any]) -> tuple[TupleKey, ...]:
    """A read's rows (``_COLUMNS`` and the part) as tuples, in the order written."""
    if len(rows) > 1:
        rows.sort(key=itemgetter(_ID))
    return tuple(
        _key(row[_OBJECT], row[_RELATION], row[_USER], row[_CONDITION], row[_CONTEXT])
        for row in rows
    )


def _whole_objects(
    conn: sa.Connection, store_id: str, objects: list[str], limit: int, part: int
) -> sa.Select[Any]:
    """At most ``limit + 1`` tuples of each of ``objects`` (``read_object``)."""
    t = fga_tuples.c
    tag = sa.literal(part, sa.Integer()).label("part")
    if conn.dialect.name == "postgresql":
        wanted = sa.func.unnest(_text_array(objects)).table_valued("wanted").render_derived()
        each = (
            sa.select(*_COLUMNS)
            .where(t.store_id == store_id, t.object == wanted.c.wanted)
            .limit(limit + 1)
            .lateral()
        )
        return sa.select(*each.c, tag).select_from(wanted).join(each, sa.true())
    numbered = (
        sa.select(*_COLUMNS, sa.func.row_number().over(partition_by=t.object).label("n"))
        .where(t.store_id == store_id, t.object.in_(objects))
        .subquery()
    )
    return sa.select(*(numbered.c[c.name] for c in _COLUMNS), tag).where(numbered.c.n <= limit + 1)


def fetch_memory(index: MemoryTupleReader, reads: Sequence[Read], revision: int) -> Fetched:
    """``reads`` answered by an in-memory index (``--fga-store memory``)."""
    answers = []
    for method, *args in reads:
        if method == "read_object":
            answers.append(tuple(index.read_object(args[0], int(args[1]))))
        else:
            answers.append(tuple(getattr(index, method)(*args)))
    return Fetched(revision, answers)
