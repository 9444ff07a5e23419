"""The SQL statements of the authorization store, shared by :class:`~storage.fga.SqlFgaStore`
and the bulk import (:mod:`storage.fga_bulk`): the store's revision, tuple writes and
deletes with their changelog rows, model versions, a reset, the changelog since a
revision, pages of tuples. Each takes the connection of a transaction its caller runs
(under the writers' lock for a write)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from bastion.core.fga.tuples import TupleKey, split_object
from bastion.storage.fga_reads import key_from_row, key_hash
from bastion.storage.fga_types import (
    MAX_REPLAY,
    Change,
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
    WriteOptions,
)
from bastion.storage.sql.schema import fga_changelog, fga_models, fga_tuples

__all__ = [
    "changes_since",
    "condition_of",
    "context_json",
    "latest_model",
    "max_revision",
    "read_page",
    "reset",
    "write",
    "write_model",
]

_CHUNK = 500


def context_json(key: TupleKey) -> str | None:
    return None if key.context is None else json.dumps(dict(key.context), sort_keys=True)


#: Built once: every request asks it, and building the statement each time cost a third of
#: the probe's CPU time on SQLite.
_MAX_REVISION = sa.select(sa.func.max(fga_changelog.c.revision)).where(
    fga_changelog.c.store_id == sa.bindparam("store_id")
)


def max_revision(conn: sa.Connection, store_id: str) -> int:
    found = conn.execute(_MAX_REVISION, {"store_id": store_id}).scalar()
    return int(found or 0)


def _log_rows(
    store_id: str, start: int, operation: str, keys: Sequence[TupleKey], now: int
) -> list[dict[str, Any]]:
    return [
        {
            "store_id": store_id,
            "revision": start + i,
            "operation": operation,
            "object": k.object,
            "relation": k.relation,
            "user": k.user,
            "condition_name": k.condition or None,
            "condition_context": context_json(k),
            "created_at": now,
        }
        for i, k in enumerate(keys, 1)
    ]


def condition_of(key: TupleKey) -> tuple[str | None, str | None]:
    return key.condition or None, context_json(key)


def _existing(
    conn: sa.Connection, store_id: str, hashes: list[str]
) -> dict[str, tuple[str | None, str | None]]:
    """The stored tuples among ``hashes``: key hash -> (condition name, context JSON)."""
    found: dict[str, tuple[str | None, str | None]] = {}
    t = fga_tuples.c
    for i in range(0, len(hashes), _CHUNK):
        chunk = hashes[i : i + _CHUNK]
        rows = conn.execute(
            sa.select(t.key_hash, t.condition_name, t.condition_context).where(
                t.store_id == store_id, t.key_hash.in_(chunk)
            )
        )
        found.update((r.key_hash, (r.condition_name, r.condition_context)) for r in rows)
    return found


def _insert_rows(conn: sa.Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """``rows`` into ``table``: on PostgreSQL as ONE statement whose parameters are a
    column's values each (``unnest``), where psycopg's executemany would send a statement
    per row (pipelined, but each parsed, planned and run on its own); the other drivers
    batch an executemany themselves (pymysql into multi-row INSERTs, sqlite3 in one
    prepared statement)."""
    if conn.dialect.name != "postgresql" or not rows:
        conn.execute(sa.insert(table), rows)
        return
    names = list(rows[0])
    conn.execute(_unnest_insert(table, tuple(names)), {n: [r[n] for r in rows] for n in names})


@functools.cache
def _unnest_insert(table: sa.Table, names: tuple[str, ...]) -> sa.TextClause:
    # An array's element type without its collation (the column's own applies).
    types = {
        column.name: column.type.compile(dialect=postgresql.dialect()).split(" COLLATE ")[0]
        for column in table.c
    }
    columns = ", ".join(f'"{n}"' for n in names)
    arrays = ", ".join(f"CAST(:{n} AS {types[n]}[])" for n in names)
    return sa.text(f"INSERT INTO {table.name} ({columns}) SELECT * FROM unnest({arrays})")  # noqa: S608


def write(
    store_id: str,
    writes: Sequence[TupleKey],
    deletes: Sequence[TupleKey],
    options: WriteOptions,
    now: int,
    conn: sa.Connection,
) -> int:
    revision = max_revision(conn, store_id)
    delete_hashes = [key_hash(k) for k in deletes]
    if delete_hashes:
        present = _existing(conn, store_id, delete_hashes)
        kept = []
        for key, digest in zip(deletes, delete_hashes, strict=True):
            if digest in present:
                kept.append(key)
            elif not options.ignore_missing:
                raise TupleConflict(key, exists=False)
        deletes = kept
        delete_hashes = [h for h in delete_hashes if h in present]
        for i in range(0, len(delete_hashes), _CHUNK):
            conn.execute(
                sa.delete(fga_tuples).where(
                    fga_tuples.c.store_id == store_id,
                    fga_tuples.c.key_hash.in_(delete_hashes[i : i + _CHUNK]),
                )
            )
        if deletes:
            rows = _log_rows(store_id, revision, "delete", deletes, now)
            _insert_rows(conn, fga_changelog, rows)
        revision += len(deletes)
    write_hashes = [key_hash(k) for k in writes]
    if write_hashes:
        present = _existing(conn, store_id, write_hashes)
        if options.ignore_existing:
            # Only the very same tuple is skipped: one with another condition still fails.
            changed = [
                (k, h)
                for k, h in zip(writes, write_hashes, strict=True)
                if present.get(h) != condition_of(k)
            ]
            writes, write_hashes = [k for k, _ in changed], [h for _, h in changed]
        for key, digest in zip(writes, write_hashes, strict=True):
            if digest in present:
                raise TupleConflict(key, exists=True)
    if write_hashes:
        _insert_rows(
            conn,
            fga_tuples,
            [
                {
                    "store_id": store_id,
                    "key_hash": digest,
                    "object_type": split_object(k.object)[0],
                    "object": k.object,
                    "relation": k.relation,
                    "user": k.user,
                    "condition_name": k.condition or None,
                    "condition_context": context_json(k),
                    "created_at": now,
                }
                for k, digest in zip(writes, write_hashes, strict=True)
            ],
        )
        rows = _log_rows(store_id, revision, "write", writes, now)
        _insert_rows(conn, fga_changelog, rows)
        revision += len(writes)
    return revision


def write_model(store_id: str, model: StoredModel, now: int, conn: sa.Connection) -> int:
    revision = max_revision(conn, store_id) + 1
    conn.execute(
        sa.insert(fga_models).values(
            id=model.id, store_id=store_id, dsl=model.dsl, revision=revision, created_at=now
        )
    )
    conn.execute(
        sa.insert(fga_changelog).values(
            store_id=store_id, revision=revision, operation="model", object=model.id, created_at=now
        )
    )
    return revision


def reset(store_id: str, now: int, conn: sa.Connection) -> int:
    mine = fga_tuples.c.store_id == store_id
    if conn.execute(sa.select(fga_tuples.c.id).where(mine).limit(1)).first() is not None:
        raise StoreNotEmpty()
    revision = max_revision(conn, store_id) + 1
    conn.execute(sa.delete(fga_models).where(fga_models.c.store_id == store_id))
    conn.execute(sa.delete(fga_changelog).where(fga_changelog.c.store_id == store_id))
    conn.execute(
        sa.insert(fga_changelog).values(
            store_id=store_id, revision=revision, operation="reset", created_at=now
        )
    )
    return revision


def latest_model(conn: sa.Connection, store_id: str) -> StoredModel | None:
    row = conn.execute(
        sa.select(fga_models.c.id, fga_models.c.dsl)
        .where(fga_models.c.store_id == store_id)
        .order_by(fga_models.c.revision.desc())
        .limit(1)
    ).first()
    return None if row is None else StoredModel(row.id, row.dsl)


def changes_since(store_id: str, since: int, conn: sa.Connection) -> list[Change] | None:
    rows = conn.execute(
        sa.select(fga_changelog)
        .where(fga_changelog.c.store_id == store_id, fga_changelog.c.revision > since)
        .order_by(fga_changelog.c.revision)
        .limit(MAX_REPLAY + 1)
    ).all()
    if not rows:
        return []
    if len(rows) > MAX_REPLAY or rows[0].revision != since + 1:
        return None
    model_ids = [r.object for r in rows if r.operation == "model"]
    dsl: dict[str, str] = {}
    if model_ids:
        found = conn.execute(
            sa.select(fga_models.c.id, fga_models.c.dsl).where(fga_models.c.id.in_(model_ids))
        )
        dsl = {row.id: row.dsl for row in found}
    changes: list[Change] = []
    for row in rows:
        if row.operation == "model":
            # A reset deletes model versions and their rows together, so the version is here.
            model = StoredModel(row.object, dsl[row.object])
            changes.append(Change(row.revision, "model", model=model))
        elif row.operation == "reset":
            changes.append(Change(row.revision, "reset"))
        else:
            key = key_from_row(row)
            changes.append(Change(row.revision, row.operation, key=key, created_at=row.created_at))
    return changes


def read_page(
    store_id: str, where: TupleFilter, page_size: int, after: int, conn: sa.Connection
) -> tuple[Sequence[Any], int | None]:
    query = sa.select(fga_tuples).where(fga_tuples.c.store_id == store_id, fga_tuples.c.id > after)
    if where.user:
        query = query.where(fga_tuples.c.user == where.user)
    if where.relation:
        query = query.where(fga_tuples.c.relation == where.relation)
    if where.object:
        object_type, object_id = split_object(where.object)
        if object_id:
            query = query.where(fga_tuples.c.object == where.object)
        else:
            query = query.where(fga_tuples.c.object_type == object_type)
    rows = conn.execute(query.order_by(fga_tuples.c.id).limit(page_size + 1)).all()
    more = len(rows) > page_size
    rows = rows[:page_size]
    return rows, (rows[-1].id if more else None)
