"""An import on PostgreSQL (:func:`storage.fga_bulk.import_tuples`): the stream is sent
with ``COPY`` (text, a batch a write) into a stage table, with no lock held: it is read,
validated and sent meanwhile, and each line draws its tuple id there, in the stream's
order. Then one of two ways, in the same transaction:

- **A store with no tuples** (the first import, the one that counts at scale): the stage
  is a plain table shaped like the tuples' (``COPY ... FREEZE``); its indexes are built by
  sorting, still with no lock held, and it becomes the store's own partition (migration
  0014): holding the writers' lock, the changelog is written from it and it is attached
  (a ``CHECK`` on the store id, added before, spares the attach a scan of it; the
  ``DEFAULT`` partition is scanned for the store's rows: none). A B-tree built by sorting
  costs a fraction of one grown row by row in random order (bench/RESULTS.md, "Import: a
  store loaded into a bare table, then its indexes").
- **Otherwise** (the store has tuples, a key repeats in the stream, or another writer
  filled the store meanwhile): holding the lock, the tuples are inserted from the stage
  in key order (the unique key's index filled from left to right) and the changelog
  written from it. First without ``ON CONFLICT`` (a fifth less time), in a savepoint; if
  a key is stored already or repeated, that is undone and one ``INSERT ... SELECT ... ON
  CONFLICT DO NOTHING`` runs instead, whose returned rows are the changelog's, and the
  stage is joined to the store to tell skipped repeats from conflicts.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa

from bastion.core.fga.tuples import TupleKey, split_object
from bastion.storage import fga_statements as statements
from bastion.storage.fga_partitions import PLAIN_STORE_ID, drop_own_partition
from bastion.storage.fga_reads import key_from_row, key_hash

__all__ = [
    "MAINTENANCE_MEMORY",
    "MAX_CONFLICTS",
    "Batch",
    "CopyText",
    "copy_load",
    "copy_text",
]

#: A batch of the stream: (line, tuple) pairs, validated already.
Batch = Sequence[tuple[int, TupleKey]]


class CopyText(NamedTuple):
    """A batch already in ``COPY``'s text format (:func:`copy_text`), made elsewhere (the
    import's worker processes, :mod:`bastion.fga_import_parallel`)."""

    text: str
    tuples: int


#: Conflicts named (the first ones, by line).
MAX_CONFLICTS = 20
#: The memory each index build of a store's partition sorts in (PostgreSQL's default,
#: 64MB, sorts 10 million keys on disk).
MAINTENANCE_MEMORY = "1GB"
_UNIQUE_VIOLATION = "23505"

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
#: A store with tuples: a temporary stage. Each line's tuple id is drawn as it is copied,
#: in the stream's order: the store's tuples (their ids) and the changelog stay in that
#: order while the insert goes in key order.
_TEMPORARY_STAGE = (
    "CREATE TEMPORARY TABLE {stage} (line bigint, key_hash text, "
    'object_type text, object text, relation text, "user" text, condition_name text, '
    "condition_context text, id bigint DEFAULT nextval({sequence})) ON COMMIT DROP"
)
#: An empty store: the partition to be, with the stream's line and place (1, 2, ...: the
#: changelog's revisions follow it, with no sort) beside.
_TABLE_STAGE = (
    "CREATE TEMPORARY SEQUENCE {stage}_n",
    "CREATE TABLE {stage} (LIKE service_fga_tuples INCLUDING DEFAULTS)",
    "ALTER TABLE {stage} ADD COLUMN line bigint, ADD COLUMN n bigint DEFAULT nextval('{stage}_n'), "
    "ALTER COLUMN store_id SET DEFAULT '{store_id}', ALTER COLUMN created_at SET DEFAULT {now}",
)
#: The stage's indexes, the tuples' own (migration 0014), the unique key first: a key
#: repeated in the stream stops it before the rest is built.
_PARTITION_KEYS = (
    "ALTER TABLE {stage} ADD CONSTRAINT {part}_key UNIQUE (key_hash, store_id)",
    "ALTER TABLE {stage} ADD CONSTRAINT {part}_pkey PRIMARY KEY (store_id, id)",
    "CREATE INDEX {part}_object_relation ON {stage} (object, relation)",
    'CREATE INDEX {part}_user_object_type ON {stage} ("user", object_type)',
    "CREATE INDEX {part}_usersets ON {stage} (store_id, object, relation) "
    "WHERE \"user\" LIKE '%#%'",
    "ALTER TABLE {stage} ADD CONSTRAINT {part}_store CHECK (store_id = '{store_id}')",
)
_ATTACH = (
    "ALTER TABLE {stage} DROP COLUMN line, DROP COLUMN n, ALTER COLUMN created_at DROP DEFAULT",
    "DROP SEQUENCE {stage}_n",
    "ALTER TABLE {stage} RENAME TO {part}",
    "ALTER TABLE service_fga_tuples ATTACH PARTITION {part} FOR VALUES IN ('{store_id}')",
    "ALTER TABLE {part} DROP CONSTRAINT {part}_store",
)
_PARTITION_CHANGELOG = """
INSERT INTO service_fga_changelog (store_id, revision, operation, object, relation, "user",
                                   condition_name, condition_context, created_at)
SELECT :store_id, :base + n, 'write', object, relation, "user", condition_name,
       condition_context, :now
FROM {stage}
"""
#: In key order: the unique key's index is filled from left to right rather than at
#: random (a quarter less time for a million tuples, and a tenth of the WAL's page
#: images); ``line`` second, so that of repeats in the stream the first is kept.
_ADD_TUPLES = """
INSERT INTO service_fga_tuples (id, store_id, key_hash, object_type, object, relation,
                                "user", condition_name, condition_context, created_at)
SELECT id, :store_id, key_hash, object_type, object, relation, "user", condition_name,
       condition_context, :now
FROM {stage}
ORDER BY key_hash COLLATE "C", line
"""
# Every line is new (neither stored nor repeated): the stage is the changelog.
_CHANGELOG_ALL = """
INSERT INTO service_fga_changelog (store_id, revision, operation, object, relation, "user",
                                   condition_name, condition_context, created_at)
SELECT :store_id, :base + row_number() OVER (ORDER BY id), 'write', object, relation,
       "user", condition_name, condition_context, :now
FROM {stage}
"""
# Otherwise: the tuples the stream adds, and a changelog row for each.
_INSERT_NEW = (
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
# After the insert, each key's stored tuple is the store's (or the stream's first): a line
# that differs from it conflicts.
_CONFLICTS = """
SELECT s.line, s.object, s.relation, s."user", s.condition_name, s.condition_context
FROM {stage} s
JOIN service_fga_tuples t ON t.store_id = :store_id AND t.key_hash = s.key_hash
WHERE t.condition_name IS DISTINCT FROM s.condition_name
   OR t.condition_context IS DISTINCT FROM s.condition_context
ORDER BY s.line
LIMIT :limit
"""
_HAS_TUPLES = sa.text("SELECT EXISTS (SELECT 1 FROM service_fga_tuples WHERE store_id = :s)")


def copy_load(
    conn: sa.Connection,
    store_id: str,
    batches: Iterable[Batch | CopyText],
    now: int,
    begin_writing: Callable[[sa.Connection], int],
    progress: Callable[[int], None],
) -> tuple[int, int, list[tuple[int, TupleKey]]]:
    """Loads the stream; ``begin_writing`` takes the writers' lock and returns the store's
    revision. Returns (tuples given, tuples written, conflicts by line)."""
    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
    token = secrets.token_hex(6)
    stage = f"bastion_fga_import_{token}"
    own = PLAIN_STORE_ID.fullmatch(store_id) is not None and not _has_tuples(conn, store_id)
    if own:
        for statement in _TABLE_STAGE:
            _ddl(conn, statement, stage=stage, store_id=store_id, now=now)
    else:
        sequence = conn.exec_driver_sql(
            "SELECT quote_literal(pg_get_serial_sequence('service_fga_tuples', 'id'))"
        ).scalar_one()
        conn.exec_driver_sql(_TEMPORARY_STAGE.format(stage=stage, sequence=sequence))
    given = _copy(conn, stage, batches, progress, freeze=own)
    names = {"stage": stage, "part": f"service_fga_tuples_{token}", "store_id": store_id}
    indexed = own and _build_partition(conn, names)
    base = begin_writing(conn)
    values = {"store_id": store_id, "now": now, "base": base}
    if indexed and not _has_tuples(conn, store_id):
        conn.execute(sa.text(_PARTITION_CHANGELOG.format(**names)), values)
        drop_own_partition(conn, store_id)  # emptied since it was made
        for statement in _ATTACH:
            _ddl(conn, statement, **names)
        return given, given, []
    written = _insert_all(conn, stage, values, given)
    if written is None:
        written = conn.execute(sa.text(_INSERT_NEW.format(stage=stage)), values).rowcount
    conflicts: list[tuple[int, TupleKey]] = []
    if written < given:
        query = sa.text(_CONFLICTS.format(stage=stage))
        rows = conn.execute(query, {"store_id": store_id, "limit": MAX_CONFLICTS}).all()
        conflicts = [(row.line, key_from_row(row)) for row in rows]
    if own:
        conn.exec_driver_sql(f"DROP TABLE {stage}")
        conn.exec_driver_sql(f"DROP SEQUENCE {stage}_n")
    return given, written, conflicts


def _has_tuples(conn: sa.Connection, store_id: str) -> bool:
    return bool(conn.execute(_HAS_TUPLES, {"s": store_id}).scalar_one())


def _copy(
    conn: sa.Connection,
    stage: str,
    batches: Iterable[Batch | CopyText],
    progress: Callable[[int], None],
    *,
    freeze: bool,
) -> int:
    """Sends the stream; its count. ``freeze``: the rows go in frozen (the stage was made
    in this transaction), so that the first reads do not rewrite every page."""
    given = 0
    options = " WITH (FREEZE)" if freeze else ""
    driver: Any = conn.connection.driver_connection
    statement = f"COPY {stage} ({', '.join(_STAGE_COLUMNS)}) FROM STDIN{options}"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for batch in batches:
            if isinstance(batch, CopyText):
                copy.write(batch.text)
                given += batch.tuples
            else:
                copy.write(copy_text(batch))
                given += len(batch)
            progress(given)
    return given


def _build_partition(conn: sa.Connection, names: dict[str, str]) -> bool:
    """The stage's indexes; False (none built) if a key repeats in the stream."""
    conn.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{MAINTENANCE_MEMORY}'")
    unique, *rest = _PARTITION_KEYS
    try:
        with conn.begin_nested():
            _ddl(conn, unique, **names)
    except sa.exc.IntegrityError as exc:
        if _sqlstate(exc) == _UNIQUE_VIOLATION:
            return False
        raise
    for statement in rest:
        _ddl(conn, statement, **names)
    return True


def _ddl(conn: sa.Connection, statement: str, **names: object) -> None:
    # Through text(): the drivers' placeholders (``%``) are escaped.
    conn.execute(sa.text(statement.format(**names)))


def _insert_all(conn: sa.Connection, stage: str, values: dict[str, Any], given: int) -> int | None:
    """Every line as new, without ``ON CONFLICT`` (a fifth less time), or None (nothing
    done) when a key is stored already or repeated."""
    try:
        with conn.begin_nested():
            conn.execute(sa.text(_ADD_TUPLES.format(stage=stage)), values)
    except sa.exc.IntegrityError as exc:
        if _sqlstate(exc) == _UNIQUE_VIOLATION:
            return None
        raise
    conn.execute(sa.text(_CHANGELOG_ALL.format(stage=stage)), values)
    return given


def _sqlstate(exc: sa.exc.IntegrityError) -> str | None:
    # The only unique keys are (key_hash, store_id) and (store_id, id), whose ids come
    # from the sequence: a violation is a key stored or repeated.
    code: str | None = getattr(exc.orig, "sqlstate", None)
    return code


#: COPY's text format: these characters in a value are written escaped.
_NULL = "\\N"
_SPECIAL = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(batch: Batch) -> str:
    """``batch`` as lines of COPY's text format, in the stage's columns."""
    context = statements.context_json
    text = "".join(
        [
            f"{line}\t{key_hash(key)}\t{key.object.partition(':')[0]}\t{key.object}"
            f"\t{key.relation}\t{key.user}"
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
