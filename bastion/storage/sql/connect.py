"""How each database is connected to: SQLite's pragmas (WAL, busy timeout, foreign
keys), PostgreSQL's statement and lock bounds, JIT off and TLS for asyncpg and psycopg, and
MariaDB/MySQL's lock waits and TLS for pymysql, and the trio-asyncio loop asyncpg runs
in (:func:`storage.sql.database.open_database`)."""

from __future__ import annotations

import sqlite3
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
import trio_asyncio  # type: ignore[import-untyped]
from sqlalchemy import event

from bastion.storage.config import StorageConfig

__all__ = [
    "asyncio_loop",
    "asyncpg_args",
    "configure_sqlite",
    "milliseconds",
    "pg_settings",
    "psycopg_args",
    "pymysql_args",
]


def milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def enable_wal(cursor: Any, timeout: float) -> None:
    """WAL mode (kept in the file: only a new database changes). Switching needs the file to
    itself, and SQLite answers "database is locked" at once, busy timeout or not, while
    another process holds it (two instances migrating one new file): wait, within the
    timeout."""
    deadline = time.monotonic() + timeout
    while cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def configure_sqlite(engine: sa.Engine, timeout: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Transactions are begun explicitly (BEGIN / BEGIN IMMEDIATE) by Database.run.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        enable_wal(cursor, timeout)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()


def pg_settings(config: StorageConfig) -> dict[str, str]:
    """Each PostgreSQL session's settings: statements and lock waits bounded by the
    timeout, no JIT compilation and no parallel query. bastion's statements are index
    reads and small writes; the planner's cost estimates for a batch of the engine's reads
    (a ``UNION ALL`` of ``= ANY(array)`` parts) pass JIT's thresholds, and compiling one
    took 3.5 s of a cold ListObjects' 4.2 s statement; they also pass the parallel
    thresholds, and starting the workers cost more than they saved (a part of 5,000 reads:
    55-63 ms with two workers, 20-32 ms without; bench/RESULTS.md)."""
    bound = f"{milliseconds(config.timeout)}ms"
    return {
        "statement_timeout": bound,
        "lock_timeout": bound,
        "jit": "off",
        "max_parallel_workers_per_gather": "0",
    }


def asyncpg_args(config: StorageConfig) -> dict[str, Any]:
    args: dict[str, Any] = {"timeout": config.timeout, "server_settings": pg_settings(config)}
    if config.database_ca_cert or config.database_cert:
        context = ssl.create_default_context(cafile=config.database_ca_cert or None)
        if config.database_cert:
            context.load_cert_chain(config.database_cert, config.database_cert_key or None)
        args["ssl"] = context
    return args


def psycopg_args(config: StorageConfig) -> dict[str, Any]:
    """libpq's own TLS settings, matching :func:`asyncpg_args`: the server's certificate
    and host name are verified against the CA file (or the system's CAs)."""
    options = " ".join(f"-c {name}={value}" for name, value in pg_settings(config).items())
    args: dict[str, Any] = {"connect_timeout": max(1, round(config.timeout)), "options": options}
    if config.database_ca_cert or config.database_cert:
        args["sslmode"] = "verify-full"
        args["sslrootcert"] = config.database_ca_cert or "system"
        if config.database_cert:
            args["sslcert"] = config.database_cert
            args["sslkey"] = config.database_cert_key or config.database_cert
    return args


def pymysql_args(config: StorageConfig) -> dict[str, Any]:
    wait = max(1, round(config.timeout))
    args: dict[str, Any] = {
        "connect_timeout": wait,
        "init_command": f"SET SESSION innodb_lock_wait_timeout = {wait}, "
        f"SESSION lock_wait_timeout = {wait}",
    }
    tls = {
        name: path
        for name, path in (
            ("ca", config.database_ca_cert),
            ("cert", config.database_cert),
            ("key", config.database_cert_key),
        )
        if path
    }
    if tls:
        args["ssl"] = tls
    return args


@asynccontextmanager
async def asyncio_loop() -> AsyncIterator[Any]:
    """The running trio-asyncio loop, or a new one for as long as the database is open."""
    loop = trio_asyncio.current_loop.get()
    if loop is not None:
        yield loop
        return
    try:
        async with trio_asyncio.open_loop() as new_loop:
            yield new_loop
    except BaseExceptionGroup as group:
        # The loop's nursery wraps whatever left the ``async with`` body; hand it back as
        # it was raised, so callers catch StorageUnavailable, not a group.
        sole = _sole_exception(group)
        if sole is None:
            raise
        raise sole from sole.__cause__


def _sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    inner: BaseException = group
    while isinstance(inner, BaseExceptionGroup):
        if len(inner.exceptions) != 1:
            return None
        inner = inner.exceptions[0]
    return inner
