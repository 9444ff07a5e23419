"""The tuples' partitions on PostgreSQL (migration 0014): every store's tuples lie in the
``DEFAULT`` partition until an import into the empty store gives it a partition of its
own (:mod:`storage.fga_bulk_postgres`). SQLite and MySQL/MariaDB keep one table.
"""

from __future__ import annotations

import re

import sqlalchemy as sa

__all__ = ["DEFAULT_PARTITION", "drop_own_partition", "own_partition", "partition_of"]

#: The partition of every store without one of its own.
DEFAULT_PARTITION = "service_fga_tuples_default"
#: Store ids that may be written into DDL as they are (every id bastion makes, and
#: OpenFGA's ULIDs); a store with another id keeps its tuples in the default partition.
PLAIN_STORE_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")

_OWN = sa.text(
    """
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'service_fga_tuples'::regclass
  AND pg_get_expr(c.relpartbound, c.oid) = :bound
"""
)


def own_partition(conn: sa.Connection, store_id: str) -> str | None:
    """The name of the store's own partition, if it has one."""
    if PLAIN_STORE_ID.fullmatch(store_id) is None:
        return None
    bound = f"FOR VALUES IN ('{store_id}')"
    name: str | None = conn.execute(_OWN, {"bound": bound}).scalar_one_or_none()
    return name


def partition_of(conn: sa.Connection, store_id: str) -> str:
    """The partition that holds (or would hold) the store's tuples."""
    return own_partition(conn, store_id) or DEFAULT_PARTITION


def drop_own_partition(conn: sa.Connection, store_id: str) -> None:
    """Drops the store's own partition with its tuples, if it has one: a store deleted,
    or emptied and imported again. Locks the tuples' table until the commit."""
    name = own_partition(conn, store_id)
    if name is not None:
        conn.exec_driver_sql(f'DROP TABLE "{name}"')
