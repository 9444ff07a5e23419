"""How one attempt at a call runs on each driver, for
:class:`~storage.sql.database.Database` (which decides what a call means: its
transaction, locks, replays, deadline and share of the pool).

- SQLite and MySQL/MariaDB (pymysql): the sync engine, in a worker thread behind the
  ``trio.CapacityLimiter`` as large as the connection pool.
- PostgreSQL with psycopg (the default): the sync engine in a worker thread too, but a
  cancelled caller stops waiting at once and the query the thread runs is cancelled on
  the server (:class:`_RunningQuery`); the thread then rolls back and returns its
  connection.
- PostgreSQL with asyncpg (``postgresql+asyncpg://``): under trio-asyncio, ``fn`` through
  ``AsyncConnection.run_sync``; a trio cancel scope cancels the query the same way.

Each attempt answers with ``fn``'s result and the topics its transaction asked to notify
(:func:`storage.sql.commit_topics.notify_on_commit`). A connection lost before the commit
was sent raises :class:`LostBeforeCommit`, for the caller to replay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import sqlalchemy as sa
import trio
import trio_asyncio  # type: ignore[import-untyped]
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncEngine

from bastion.storage.errors import StorageUnavailable
from bastion.storage.sql.commit_topics import take_topics
from bastion.storage.sql.locks import mysql_acquire, mysql_release

__all__ = ["DriverCalls", "LostBeforeCommit"]

T = TypeVar("T")


class LostBeforeCommit(Exception):
    """The connection died while ``fn`` ran, before its transaction's commit was sent."""

    def __init__(self, error: exc.DBAPIError) -> None:
        super().__init__(str(error))
        self.error = error


def _before_commit(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``; a lost connection becomes :class:`LostBeforeCommit`."""
    try:
        return fn(*args)
    except exc.DBAPIError as e:
        if e.connection_invalidated:
            raise LostBeforeCommit(e) from e
        raise


#: Errors that mean "could not reach the database" when opening a connection (including a
#: pool that stayed exhausted for the whole timeout).
_CONNECT_ERRORS = (exc.DBAPIError, exc.TimeoutError, OSError, TimeoutError)


class DriverCalls:
    """The engines of one database and how a call runs on them."""

    def __init__(
        self,
        *,
        dialect: str,
        timeout: float,
        engine: sa.Engine | None,
        async_engine: AsyncEngine | None,
        limiter: trio.CapacityLimiter | None,
        loop: Any,
    ) -> None:
        self.dialect = dialect
        self.timeout = timeout
        self.engine = engine
        self.async_engine = async_engine
        self.limiter = limiter
        self.loop = loop

    async def dispose(self) -> None:
        """The engines' connections closed, once the calls still running are done."""
        if self.async_engine is not None:
            await trio_asyncio.aio_as_trio(self.async_engine.dispose, loop=self.loop)()
        if self.engine is not None:
            await self._threads_finished()
            await trio.to_thread.run_sync(self.engine.dispose)

    async def _threads_finished(self) -> None:
        """Wait (at most the timeout) for calls whose callers were cancelled: their threads
        still hold connections, which must be back in the pool before it is disposed, or
        they are never closed. Each holds a limiter token until it reports back, so taking
        every token waits for them all (and keeps any new call from starting)."""
        assert self.limiter is not None
        with trio.move_on_after(self.timeout):
            for _ in range(int(self.limiter.total_tokens)):
                await self.limiter.acquire_on_behalf_of(object())

    async def once(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        abandon: bool,
        autocommit: bool,
    ) -> tuple[T, frozenset[str]]:
        """One attempt: ``fn``'s result and the topics its transaction asked for."""
        if self.async_engine is not None:
            run_async = trio_asyncio.aio_as_trio(self._asyncio, loop=self.loop)
            return await run_async(fn, autocommit)  # type: ignore[no-any-return]
        if self.dialect == "postgresql":
            return await self._cancellable(fn, autocommit)
        return await trio.to_thread.run_sync(
            self._sync, fn, begin, mysql_lock, abandon_on_cancel=abandon, limiter=self.limiter
        )

    async def _cancellable(
        self, fn: Callable[[sa.Connection], T], autocommit: bool
    ) -> tuple[T, frozenset[str]]:
        """:meth:`_sync` on PostgreSQL: a cancelled caller stops waiting at once, and
        the query its thread is running is cancelled on the server."""
        running = _RunningQuery()
        try:
            return await trio.to_thread.run_sync(
                partial(self._sync, fn, None, None, autocommit=autocommit, running=running),
                abandon_on_cancel=True,
                limiter=self.limiter,
            )
        except trio.Cancelled:
            trio.lowlevel.start_thread_soon(
                partial(running.cancel, self.timeout), lambda _outcome: None
            )
            raise

    def _sync(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        *,
        autocommit: bool = False,
        running: _RunningQuery | None = None,
    ) -> tuple[T, frozenset[str]]:
        assert self.engine is not None
        try:
            conn = self.engine.connect()
        except _CONNECT_ERRORS as e:
            raise self.unreachable(e) from e
        with conn:
            if running is not None:
                running.start(conn)
            if mysql_lock is not None:
                mysql_acquire(conn, *mysql_lock)
            try:
                if autocommit:
                    conn.execution_options(isolation_level="AUTOCOMMIT")
                    result = _before_commit(fn, conn)
                else:
                    with conn.begin():
                        if begin is not None:
                            _before_commit(conn.exec_driver_sql, begin)
                        result = _before_commit(fn, conn)
            finally:
                if running is not None:
                    running.stop()
                topics = take_topics(conn)
                if mysql_lock is not None:
                    mysql_release(conn, mysql_lock[0])
            return result, topics

    async def _asyncio(
        self, fn: Callable[[sa.Connection], T], autocommit: bool
    ) -> tuple[T, frozenset[str]]:
        assert self.async_engine is not None
        conn = self.async_engine.connect()
        try:
            await conn.start()
        except _CONNECT_ERRORS as e:
            raise self.unreachable(e) from e
        try:
            if autocommit:
                # Client-side only with asyncpg (no round trip); reset when pooled again.
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                result = await conn.run_sync(lambda sync: _before_commit(fn, sync))
            else:
                async with conn.begin():
                    result = await conn.run_sync(lambda sync: _before_commit(fn, sync))
        finally:
            topics = take_topics(conn.sync_connection)
            await conn.close()
        return result, topics

    def unreachable(self, cause: BaseException) -> StorageUnavailable:
        """Names the cause as the driver gave it (connection refused, no such database,
        access denied ...), on one line, the password never in it."""
        inner = getattr(cause, "orig", None) or cause
        text = " ".join(str(inner).split()) or type(inner).__name__
        engine = (
            self.engine
            if self.engine is not None
            else getattr(self.async_engine, "sync_engine", None)
        )
        password = engine.url.password if engine is not None else None
        if password:
            text = text.replace(str(password), "***")
        return StorageUnavailable(f"cannot connect to the {self.dialect} database: {text[:300]}")


class _RunningQuery:
    """The psycopg connection a worker thread is using, for as long as it uses it: a cancel
    request must never reach a connection that went back to the pool and serves another
    caller, so ``stop`` waits for a cancel in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dbapi: Any = None

    def start(self, conn: sa.Connection) -> None:
        with self._lock:
            self._dbapi = conn.connection.dbapi_connection

    def stop(self) -> None:
        with self._lock:
            self._dbapi = None

    def cancel(self, timeout: float) -> None:
        with self._lock:
            if self._dbapi is not None:
                self._dbapi.cancel_safe(timeout=timeout)
