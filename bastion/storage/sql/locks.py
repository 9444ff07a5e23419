"""Cross-instance locks of :meth:`~storage.sql.database.Database.run_locked`: a
PostgreSQL transaction-scoped advisory lock per key, MariaDB/MySQL ``GET_LOCK`` names
held around the work's transaction (SQLite has one writer: no lock to take)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from bastion.storage.errors import StorageUnavailable
from bastion.storage.sql.connect import milliseconds

__all__ = [
    "lock_in_transaction",
    "mysql_acquire",
    "mysql_lock_name",
    "mysql_release",
    "pg_lock_id",
    "pg_locked",
]

T = TypeVar("T")


def pg_lock_id(key: str) -> int:
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def pg_locked(
    lock_ids: list[int],
    fn: Callable[[sa.Connection], T],
    lock_wait: float | None,
    conn: sa.Connection,
) -> T:
    if lock_wait is not None:  # the transaction's own bounds instead of the connection's
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = {milliseconds(lock_wait)}")
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
    for lock_id in lock_ids:
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(lock_id))).all()
    return fn(conn)


def lock_in_transaction(conn: sa.Connection, key: str, lock_wait: float) -> None:
    """Take :meth:`Database.run_locked`'s lock ``key`` now, inside a PostgreSQL transaction
    that :meth:`Database.run` began, until it ends: for a transaction with unlocked work of
    its own first (a bulk load's staging). Waits at most ``lock_wait``; the transaction's
    statements are unbounded from here on."""
    pg_locked([pg_lock_id(key)], lambda _conn: None, lock_wait, conn)


def mysql_lock_name(key: str) -> str:
    # GET_LOCK names are limited to 64 characters.
    return "bastion_" + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()


def mysql_acquire(conn: sa.Connection, names: tuple[str, ...], timeout: float) -> None:
    # Taken outside the work's transaction, so that its snapshot starts after the previous
    # holder committed. A lock that cannot be had releases the ones already taken.
    wait = max(1, round(timeout))
    for taken, name in enumerate(names):
        got = conn.execute(sa.select(sa.func.get_lock(name, wait))).scalar_one()
        conn.commit()
        if got != 1:
            mysql_release(conn, names[:taken])
            raise StorageUnavailable("timed out waiting for a database lock")


def mysql_release(conn: sa.Connection, names: tuple[str, ...]) -> None:
    if conn.invalidated:
        return  # the server dropped the session, and its locks with it
    for name in reversed(names):
        conn.execute(sa.select(sa.func.release_lock(name))).all()
    conn.commit()
