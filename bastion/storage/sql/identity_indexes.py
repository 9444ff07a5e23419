"""Drop unique indexes and constraints left on email / phone_number (spec Versioning 5).

The previous major version made ``email`` and ``phone_number`` unique; version 2 keeps
them as plain indexes and enforces uniqueness itself. Whatever the stale index or
constraint is called, and whether it is a column constraint, a table constraint, a unique
index or a unique expression index (``lower(email)``), it goes. SQLite cannot drop a
table's UNIQUE constraint, so there the table is rebuilt without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations

from bastion.storage.sql.schema import IDENTITY_COLUMNS

__all__ = ["drop_stale_unique_indexes"]


@dataclass(frozen=True)
class _Stale:
    table: str
    name: str | None
    #: "index" (DROP INDEX) or "constraint" (ALTER TABLE ... DROP CONSTRAINT / rebuild)
    kind: str


def drop_stale_unique_indexes(conn: sa.Connection) -> list[str]:
    """Drop them; return a description of each one dropped. Idempotent."""
    dropped: list[str] = []
    existing = set(sa.inspect(conn).get_table_names())
    for table, columns in IDENTITY_COLUMNS.items():
        if table not in existing:
            continue
        stale = _FINDERS[conn.dialect.name](conn, table, columns)
        for item in stale:
            if item.kind == "index":
                _drop_index(conn, item)
        constraints = [s for s in stale if s.kind == "constraint"]
        if constraints:
            _drop_constraints(conn, table, constraints)
        dropped += [f"{s.table}.{s.name or '(unnamed unique constraint)'}" for s in stale]
    return dropped


def _mentions(text: str, columns: tuple[str, ...]) -> bool:
    return re.search(r"\b(" + "|".join(columns) + r")\b", text) is not None


def _find_postgresql(conn: sa.Connection, table: str, columns: tuple[str, ...]) -> list[_Stale]:
    inspector = sa.inspect(conn)
    stale = [
        _Stale(table, uc["name"], "constraint")
        for uc in inspector.get_unique_constraints(table)
        if set(uc["column_names"]) & set(columns)
    ]
    for index in inspector.get_indexes(table):
        if not index["unique"] or "duplicates_constraint" in index:
            continue
        names = [c for c in index["column_names"] if c is not None]
        expressions = " ".join(str(e) for e in index.get("expressions") or ())
        if set(names) & set(columns) or _mentions(expressions, columns):
            stale.append(_Stale(table, index["name"], "index"))
    return stale


def _find_mysql(conn: sa.Connection, table: str, columns: tuple[str, ...]) -> list[_Stale]:
    # In MySQL/MariaDB every unique constraint is a unique index.
    stale: list[_Stale] = []
    for index in sa.inspect(conn).get_indexes(table):
        if not index["unique"]:
            continue
        names = [c for c in index["column_names"] if c is not None]
        expressions = " ".join(str(e) for e in index.get("expressions") or ())
        if set(names) & set(columns) or _mentions(expressions, columns):
            stale.append(_Stale(table, index["name"], "index"))
    return stale


def _find_sqlite(conn: sa.Connection, table: str, columns: tuple[str, ...]) -> list[_Stale]:
    # PRAGMAs rather than the inspector: it skips expression indexes (with a warning).
    stale: list[_Stale] = []
    quoted = conn.dialect.identifier_preparer.quote(table)
    for row in conn.exec_driver_sql(f"PRAGMA index_list({quoted})").mappings():
        if not row["unique"] or row["origin"] == "pk":
            continue
        info = conn.exec_driver_sql(
            f"PRAGMA index_info({conn.dialect.identifier_preparer.quote(row['name'])})"
        )
        names = {r[2] for r in info if r[2] is not None}
        if row["origin"] == "u":
            if names & set(columns):
                stale.append(_Stale(table, None, "constraint"))
            continue
        sql = conn.execute(
            sa.text("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :n"),
            {"n": row["name"]},
        ).scalar_one()
        if names & set(columns) or _mentions(sql or "", columns):
            stale.append(_Stale(table, row["name"], "index"))
    return stale


_FINDERS = {"postgresql": _find_postgresql, "mysql": _find_mysql, "sqlite": _find_sqlite}


def _drop_index(conn: sa.Connection, item: _Stale) -> None:
    assert item.name is not None
    ops = Operations(MigrationContext.configure(conn))
    ops.drop_index(item.name, table_name=item.table)


def _drop_constraints(conn: sa.Connection, table: str, items: list[_Stale]) -> None:
    ops = Operations(MigrationContext.configure(conn))
    if conn.dialect.name != "sqlite":
        for item in items:
            assert item.name is not None
            ops.drop_constraint(item.name, table, type_="unique")
        return
    # SQLite: rebuild the table from its reflection, minus the identity unique constraints.
    # Stale unique indexes were dropped already, so reflection sees only what stays.
    columns = IDENTITY_COLUMNS[table]
    reflected = sa.Table(table, sa.MetaData(), autoload_with=conn)
    for constraint in list(reflected.constraints):
        if isinstance(constraint, sa.UniqueConstraint) and {
            c.name for c in constraint.columns
        } & set(columns):
            reflected.constraints.discard(constraint)
    with ops.batch_alter_table(table, copy_from=reflected, recreate="always"):
        pass
