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

- PostgreSQL: ``COPY`` into a stage, then, into an empty store, the stage's indexes built
  and the stage attached as the store's own partition; otherwise the tuples inserted from
  the stage in key order (:mod:`storage.fga_bulk_postgres`). bench/RESULTS.md ("Import:
  levers measured", and the sections after it) has the figures.
- SQLite and MySQL/MariaDB: holding the lock from the start (SQLite has one writer
  anyway), batches of multi-row inserts through the store's own write
  (:func:`storage.fga_statements.write`), repeats dropped per batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import sqlalchemy as sa
import trio

from bastion.core.fga.tuples import TupleKey
from bastion.storage import fga_statements as statements
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import WRITE_LOCK, StoredModel, TupleConflict, WriteOptions
from bastion.storage.fga_bulk_postgres import MAX_CONFLICTS, Batch, CopyText, copy_load
from bastion.storage.fga_partitions import partition_of
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
#: Tuples written by a PostgreSQL import past which it refreshes the table's statistics.
ANALYZE_AFTER = 10_000
#: Tuples per read of an export.
_EXPORT_BATCH = 5_000


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
    batches: Iterable[Batch | CopyText],
    model_id: str,
    *,
    progress: Callable[[int], None] = lambda _given: None,
    clock: Callable[[], float] = time.time,
) -> ImportReport:
    """Write every tuple of ``batches`` into the store, or none.

    ``batches`` is consumed in a worker thread (it may read and validate a file as it
    goes; an exception it raises rolls everything back; :class:`CopyText` batches, made
    elsewhere, on PostgreSQL alone); ``model_id``: the model it was
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
        await db.run(partial(_analyze, store_id))
    return report


def _analyze(store_id: str, conn: sa.Connection) -> None:
    conn.exec_driver_sql(f'ANALYZE "{partition_of(conn, store_id)}"')


def _check_model(conn: sa.Connection, store_id: str, model_id: str) -> None:
    current: StoredModel | None = statements.latest_model(conn, store_id)
    if current is None or current.id != model_id:
        raise ModelChanged()


def _copy_load(
    conn: sa.Connection,
    store_id: str,
    batches: Iterable[Batch | CopyText],
    model_id: str,
    now: int,
    announce: Callable[[], None],
    progress: Callable[[int], None],
) -> ImportReport:
    base = 0

    def begin_writing(conn: sa.Connection) -> int:
        nonlocal base
        announce()
        lock_in_transaction(conn, WRITE_LOCK, LOCK_WAIT)
        _check_model(conn, store_id, model_id)
        base = statements.max_revision(conn, store_id)
        return base

    given, written, conflicts = copy_load(conn, store_id, batches, now, begin_writing, progress)
    if conflicts:
        raise ImportConflict(conflicts)
    return ImportReport(given, written, base + written)


# ---------------------------------------------------------------- SQLite, MySQL/MariaDB


def _batched_load(
    conn: sa.Connection,
    store_id: str,
    batches: Iterable[Batch | CopyText],
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
        if isinstance(batch, CopyText):
            raise TypeError("COPY text is PostgreSQL's alone")
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
