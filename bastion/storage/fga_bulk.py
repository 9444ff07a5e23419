"""Tuples in bulk: one store's import from a stream of tuples, and its export.

An import is ONE transaction: every tuple is written or none is. It is a write like any
other (:mod:`storage.fga`): it takes the writers' lock, each tuple it adds takes the next
revision and leaves a ``write`` row in the changelog (what OpenFGA's ``/changes`` readers
expect), and with Redis it is announced as a write in progress (:mod:`storage.fga_generation`)
until it has committed, so every server process uses it from its next request on. A
process that was more than ``MAX_REPLAY`` changes behind reloads instead of replaying
them, so a large import is never replayed row by row.

Tuples already stored as given (the same condition and context), and repeats within the
stream, are skipped: importing a file twice changes nothing the second time. A tuple
stored with another condition, or repeated with another, fails the import
(:class:`ImportConflict`, with the lines).

How each database is loaded:

- PostgreSQL: ``COPY`` (text, a batch a write) through the driver into a temporary table
  (no lock held: the stream is read, validated and sent meanwhile; each line draws its
  tuple id there, in the stream's order), then, holding the writers' lock, the tuples
  inserted in key order (the unique key's index filled from left to right) and the
  changelog from the stream's table. First without ``ON CONFLICT`` (a fifth less time),
  in a savepoint; if a key is stored already or repeated, that is undone and one
  ``INSERT ... SELECT ... ON CONFLICT DO NOTHING`` runs instead, whose returned rows are
  the changelog's (at worst the insert's time twice: the first stops at the first such
  key in key order), and the stream's table is joined to the store to tell skipped
  repeats from conflicts. bench/RESULTS.md ("Import: levers measured") has the figures.
- SQLite and MySQL/MariaDB: holding the lock from the start (SQLite has one writer
  anyway), batches of multi-row inserts through the store's own write
  (:func:`storage.fga_statements.write`), repeats dropped per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import sqlalchemy as sa
import trio

from bastion.core.fga.tuples import TupleKey, split_object
from bastion.storage import fga_statements as statements
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import WRITE_LOCK, StoredModel, TupleConflict, WriteOptions
from bastion.storage.fga_reads import key_from_row, key_hash
from bastion.storage.fga_stores import SqlFgaStores
from bastion.storage.sql.locks import lock_in_transaction
from bastion.storage.sql.schema import fga_tuples

__all__ = [
    "ANALYZE_AFTER",
    "LOCK_WAIT",
    "Batch",
    "ImportConflict",
    "ImportReport",
    "ModelChanged",
    "export_tuples",
    "import_tuples",
]

#: Seconds an import waits for the writers' lock (API writes hold it for milliseconds).
LOCK_WAIT = 60.0
#: Seconds an import's announcement lasts if its end is never announced (the process
#: died): far past the longest write step of an import (its transaction's last part).
IMPORT_LEASE = 6 * 3600.0
#: Conflicts named in an :class:`ImportConflict` (the first ones, by line).
MAX_CONFLICTS = 20
#: Tuples written by a PostgreSQL import past which it refreshes the table's statistics.
ANALYZE_AFTER = 10_000
#: Tuples per read of an export.
_EXPORT_BATCH = 5_000

#: A batch of the stream: (line, tuple) pairs, validated already.
Batch = Sequence[tuple[int, TupleKey]]


@dataclass(frozen=True, slots=True)
class ImportReport:
    #: Tuples in the stream, repeats included.
    given: int
    #: Tuples the import added.
    written: int
    #: The store's revision after the import.
    revision: int

    @property
    def skipped(self) -> int:
        return self.given - self.written


class ImportConflict(Exception):
    """Tuples stored (or given earlier in the stream) with another condition: ``(line,
    tuple)`` pairs, the first :data:`MAX_CONFLICTS` by line."""

    def __init__(self, conflicts: list[tuple[int, TupleKey]]) -> None:
        super().__init__(f"{len(conflicts)} conflicting tuple(s)")
        self.conflicts = conflicts


class ModelChanged(Exception):
    """The store's model is not the one the stream was validated against any more."""


async def import_tuples(
    stores: SqlFgaStores,
    store_id: str,
    batches: Iterable[Batch],
    model_id: str,
    *,
    progress: Callable[[int], None] = lambda _given: None,
    clock: Callable[[], float] = time.time,
) -> ImportReport:
    """Write every tuple of ``batches`` into the store, or none.

    ``batches`` is consumed in a worker thread (it may read and validate a file as it
    goes; an exception it raises rolls everything back); ``model_id``: the model it was
    validated against, which must still be the store's when the tuples go in.
    ``progress`` is called (in that thread) with the count so far after each batch.
    """
    db = stores.db
    generations = stores.generations
    now = int(clock())
    announced: list[str] = []

    def announce() -> None:
        # The tuples become visible at the commit: the write is announced before it.
        if generations is not None:
            begin = partial(generations.begin, store_id, lease=IMPORT_LEASE)
            announced.append(trio.from_thread.run(begin))

    load = _copy_load if db.dialect == "postgresql" else _batched_load

    runs = 0

    def run(conn: sa.Connection) -> ImportReport:
        # The database layer runs a transaction again after a connection lost before its
        # commit (or a deadlock): the stream is partly read by then, never twice.
        nonlocal runs
        runs += 1
        if runs > 1:
            raise StorageUnavailable(
                "the database connection was lost during the import, which was rolled "
                "back: nothing was imported; run it again"
            )
        return load(conn, store_id, batches, model_id, now, announce, progress)

    try:
        if db.dialect != "postgresql":
            return await db.run_locked(WRITE_LOCK, run, lock_wait=LOCK_WAIT)
        report = await db.run(run, write=True)
    finally:
        if generations is not None and announced:
            await generations.end(store_id, announced[0])
    if report.written >= ANALYZE_AFTER:
        # The planner's statistics now, not at autovacuum's next pass: the engine's reads
        # by object plan on them (without, a read of one object may scan the store's).
        await db.run(lambda conn: conn.exec_driver_sql("ANALYZE service_fga_tuples"))
    return report


def _check_model(conn: sa.Connection, store_id: str, model_id: str) -> None:
    current: StoredModel | None = statements.latest_model(conn, store_id)
    if current is None or current.id != model_id:
        raise ModelChanged()


# ---------------------------------------------------------------- PostgreSQL

_STAGE_COLUMNS = (
    "line",
    "key_hash",
    "object_type",
    "object",
    "relation",
    '"user"',
    "condition_name",
    "condition_context",
)
_COPY = f"COPY bastion_fga_import ({', '.join(_STAGE_COLUMNS)}) FROM STDIN"
#: Each line's tuple id is drawn as it is copied, in the file's order: the store's tuples
#: (their ids) and the changelog stay in that order while the insert goes in key order.
_STAGE_TABLE = (
    "CREATE TEMPORARY TABLE bastion_fga_import (line bigint, key_hash text, "
    'object_type text, object text, relation text, "user" text, condition_name text, '
    "condition_context text, id bigint DEFAULT nextval({sequence})) ON COMMIT DROP"
)
#: In key order: the unique key's index is filled from left to right rather than at
#: random (a quarter less time for a million tuples, and a tenth of the WAL's page
#: images); ``line`` second, so that of repeats in the stream the first is kept.
_ADD_TUPLES = """
INSERT INTO service_fga_tuples (id, store_id, key_hash, object_type, object, relation,
                                "user", condition_name, condition_context, created_at)
SELECT id, :store_id, key_hash, object_type, object, relation, "user", condition_name,
       condition_context, :now
FROM bastion_fga_import
ORDER BY key_hash COLLATE "C", line
"""
# Every line is new (neither stored nor repeated): the stream's table is the changelog.
_INSERT_ALL = sa.text(_ADD_TUPLES)
_CHANGELOG_ALL = sa.text(
    """
INSERT INTO service_fga_changelog (store_id, revision, operation, object, relation, "user",
                                   condition_name, condition_context, created_at)
SELECT :store_id, :base + row_number() OVER (ORDER BY id), 'write', object, relation,
       "user", condition_name, condition_context, :now
FROM bastion_fga_import
"""
)
# Otherwise: the tuples the stream adds, and a changelog row for each.
_INSERT_NEW = sa.text(
    "WITH added AS ("
    + _ADD_TUPLES
    + """
    ON CONFLICT (store_id, key_hash) DO NOTHING
    RETURNING id, object, relation, "user", condition_name, condition_context
)
INSERT INTO service_fga_changelog (store_id, revision, operation, object, relation, "user",
                                   condition_name, condition_context, created_at)
SELECT :store_id, :base + row_number() OVER (ORDER BY id), 'write', object, relation,
       "user", condition_name, condition_context, :now
FROM added
"""
)
_UNIQUE_KEY = "uq_service_fga_tuples_store_key"

# After the insert, each key's stored tuple is the store's (or the stream's first): a line
# that differs from it conflicts.
_CONFLICTS = sa.text(
    """
SELECT s.line, s.object, s.relation, s."user", s.condition_name, s.condition_context
FROM bastion_fga_import s
JOIN service_fga_tuples t ON t.store_id = :store_id AND t.key_hash = s.key_hash
WHERE t.condition_name IS DISTINCT FROM s.condition_name
   OR t.condition_context IS DISTINCT FROM s.condition_context
ORDER BY s.line
LIMIT :limit
"""
)


def _copy_load(
    conn: sa.Connection,
    store_id: str,
    batches: Iterable[Batch],
    model_id: str,
    now: int,
    announce: Callable[[], None],
    progress: Callable[[int], None],
) -> ImportReport:
    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
    sequence = conn.exec_driver_sql(
        "SELECT quote_literal(pg_get_serial_sequence('service_fga_tuples', 'id'))"
    ).scalar_one()
    conn.exec_driver_sql(_STAGE_TABLE.format(sequence=sequence))
    given = 0
    driver: Any = conn.connection.driver_connection
    with driver.cursor() as cursor, cursor.copy(_COPY) as copy:
        for batch in batches:
            copy.write(copy_text(batch))
            given += len(batch)
            progress(given)
    announce()
    lock_in_transaction(conn, WRITE_LOCK, LOCK_WAIT)
    _check_model(conn, store_id, model_id)
    base = statements.max_revision(conn, store_id)
    values = {"store_id": store_id, "now": now, "base": base}
    written = _insert_all(conn, values, given)
    if written is None:
        written = conn.execute(_INSERT_NEW, values).rowcount
    if written < given:
        rows = conn.execute(_CONFLICTS, {"store_id": store_id, "limit": MAX_CONFLICTS}).all()
        if rows:
            raise ImportConflict([(row.line, key_from_row(row)) for row in rows])
    return ImportReport(given, written, base + written)


def _insert_all(conn: sa.Connection, values: dict[str, Any], given: int) -> int | None:
    """Every line as new, without ``ON CONFLICT`` (a fifth less time), or None (nothing
    done) when a key is stored already or repeated."""
    try:
        with conn.begin_nested():
            conn.execute(_INSERT_ALL, values)
    except sa.exc.IntegrityError as exc:
        if getattr(getattr(exc.orig, "diag", None), "constraint_name", None) == _UNIQUE_KEY:
            return None
        raise
    conn.execute(_CHANGELOG_ALL, values)
    return given


#: COPY's text format: these characters in a value are written escaped.
_NULL = "\\N"
_SPECIAL = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(batch: Batch) -> str:
    """``batch`` as lines of COPY's text format, in the stream table's columns."""
    context = statements.context_json
    text = "".join(
        [
            f"{line}\t{key_hash(key)}"
            f"\t{split_object(key.object)[0]}\t{key.object}\t{key.relation}\t{key.user}"
            f"\t{key.condition or _NULL}\t{_NULL if key.context is None else context(key)}\n"
            for line, key in batch
        ]
    )
    # No tab, line end or backslash in any value (the usual case): nothing to escape. A
    # backslash is a null's alone then (an empty condition name is stored as null).
    rows = len(batch)
    nulls = sum(not key.condition for _, key in batch) + sum(
        key.context is None for _, key in batch
    )
    if (
        text.count("\t") == 7 * rows
        and text.count("\n") == rows
        and text.count("\\") == nulls
        and "\r" not in text
    ):
        return text
    return "".join(
        "\t".join(_escaped(value) for value in _values(line, key)) + "\n" for line, key in batch
    )


def _values(line: int, key: TupleKey) -> tuple[str | None, ...]:
    return (
        str(line),
        key_hash(key),
        split_object(key.object)[0],
        key.object,
        key.relation,
        key.user,
        key.condition or None,
        statements.context_json(key),
    )


def _escaped(value: str | None) -> str:
    return _NULL if value is None else value.translate(_SPECIAL)


# ---------------------------------------------------------------- SQLite, MySQL/MariaDB


def _batched_load(
    conn: sa.Connection,
    store_id: str,
    batches: Iterable[Batch],
    model_id: str,
    now: int,
    announce: Callable[[], None],
    progress: Callable[[int], None],
) -> ImportReport:
    announce()
    _check_model(conn, store_id, model_id)
    options = WriteOptions(ignore_existing=True)
    revision = statements.max_revision(conn, store_id)
    given = written = 0
    conflicts: list[tuple[int, TupleKey]] = []
    for batch in batches:
        given += len(batch)
        keys, lines = _first_of_each(batch, conflicts)
        while True:
            try:
                after = statements.write(store_id, keys, (), options, now, conn)
                break
            except TupleConflict as conflict:  # raised before the batch wrote anything
                # Named, and the rest written all the same (the transaction will be
                # rolled back): a later repeat of it is then found as well.
                digest = key_hash(conflict.key)
                conflicts.append((lines[digest], conflict.key))
                keys = [k for k in keys if key_hash(k) != digest]
        written += after - revision
        revision = after
        if len(conflicts) >= MAX_CONFLICTS:
            break
        progress(given)
    if conflicts:
        conflicts.sort(key=lambda item: item[0])
        raise ImportConflict(conflicts[:MAX_CONFLICTS])
    return ImportReport(given, written, revision)


def _first_of_each(
    batch: Batch, conflicts: list[tuple[int, TupleKey]]
) -> tuple[list[TupleKey], dict[str, int]]:
    """The batch without repeats, and each tuple's line; a repeat with another condition
    is a conflict."""
    first: dict[str, tuple[int, TupleKey]] = {}
    for line, key in batch:
        digest = key_hash(key)
        seen = first.get(digest)
        if seen is None:
            first[digest] = (line, key)
        elif statements.condition_of(seen[1]) != statements.condition_of(key):
            conflicts.append((line, key))
    return [key for _, key in first.values()], {d: line for d, (line, _) in first.items()}


# ---------------------------------------------------------------- export


async def export_tuples(
    stores: SqlFgaStores, store_id: str, write: Callable[[TupleKey], None]
) -> tuple[int, int]:
    """Every tuple of the store, oldest first, given to ``write`` (in a worker thread),
    as of one moment; the count and the store's revision then."""
    db = stores.db

    def run(conn: sa.Connection) -> tuple[int, int]:
        if db.dialect == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
        revision = statements.max_revision(conn, store_id)
        t = fga_tuples.c
        query = (
            sa.select(t.object, t.relation, t.user, t.condition_name, t.condition_context)
            .where(t.store_id == store_id)
            .order_by(t.id)
        )
        count = 0
        result = conn.execution_options(stream_results=True, yield_per=_EXPORT_BATCH).execute(query)
        for row in result:
            write(key_from_row(row))
            count += 1
        return count, revision

    return await db.run(run)
