"""One way to run SQL on every database: a sync function inside one transaction.

``Database.run(fn)`` calls ``fn(connection)`` (a SQLAlchemy Core ``Connection``) inside a
single transaction: committed when ``fn`` returns, rolled back when it raises. The same
``fn`` runs on every backend, each the way its driver needs (:mod:`storage.sql.driver_calls`:
a worker thread for SQLite, MySQL/MariaDB and psycopg, trio-asyncio for asyncpg; a trio
cancel scope cancels a PostgreSQL query on the server). SQLite runs in WAL mode with a
busy timeout; write transactions start with ``BEGIN IMMEDIATE`` so read-modify-write
never fails with "database is locked" halfway.

``run_locked(keys, fn)`` additionally serialises every transaction that names one of the same
keys, across processes: ``pg_advisory_xact_lock`` on PostgreSQL, ``GET_LOCK``/``RELEASE_LOCK`` on
MySQL/MariaDB, and ``BEGIN IMMEDIATE`` (one writer at a time) on SQLite
(:mod:`storage.sql.locks`). It is how the application keeps email and phone number
unique, and how the SQL memory store is atomic.

Every statement and lock wait is bounded by the config's timeout (the request deadline):
``statement_timeout`` and ``lock_timeout`` on PostgreSQL, ``innodb_lock_wait_timeout`` and
``lock_wait_timeout`` on MySQL/MariaDB, ``busy_timeout`` on SQLite, set on each new
connection (:mod:`storage.sql.connect`). A statement stopped by one of them
(:mod:`storage.sql.driver_errors`) raises :class:`StorageUnavailable` (503
``unavailable``), its transaction rolled back and its connection back in the pool. A
``run_locked`` given its own ``lock_wait`` (the migration) waits that long instead, its
statements unbounded.

A stalled table (a long migration's lock, a stuck transaction) holds the connections of
the requests waiting on it until their deadline. So that it cannot take every connection,
:data:`RESERVED_CONNECTIONS` of the pool serve only calls marked ``reserved`` (the
authorization engine's follow reads: store revision, changelog, snapshot) and every call
made under :func:`reserved_connections` (the authorization checks' route class, whose
requests also read sessions or the admin budget from a SQL memory store); everything
else shares the rest of the pool.

Under a request's deadline (:mod:`bastion.storage.deadline`) every call but a read in
autocommit holds the deadline while it runs and reports whether it wrote and committed
(a data-changing statement marks its transaction), so that a 503 never hides a write.

``notify_on_commit(conn, topic)`` inside ``fn`` (:mod:`storage.sql.commit_topics`) asks
that the callbacks registered with ``Database.on_commit(topic, callback)`` run (in trio,
in this process) once the transaction has committed; a rolled-back transaction notifies
nobody. The outbox uses it to wake its worker as soon as an item it can run exists.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar

import sqlalchemy as sa
import trio
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bastion.storage.config import StorageConfig, dialect_of, sqlalchemy_url
from bastion.storage.deadline import current_ledger
from bastion.storage.errors import StorageUnavailable
from bastion.storage.sql.commit_topics import WROTE, mark_writes
from bastion.storage.sql.connect import (
    asyncio_loop,
    asyncpg_args,
    configure_sqlite,
    psycopg_args,
    pymysql_args,
)
from bastion.storage.sql.driver_calls import DriverCalls, LostBeforeCommit
from bastion.storage.sql.driver_errors import deadlocked, timed_out
from bastion.storage.sql.locks import (
    mysql_lock_name,
    pg_lock_id,
    pg_locked,
)

__all__ = ["Database", "open_database", "reserved_connections"]

T = TypeVar("T")


class Database:
    """Runs sync Core functions in transactions. Get one from :func:`open_database`."""

    def __init__(
        self,
        *,
        dialect: str,
        timeout: float,
        engine: sa.Engine | None = None,
        async_engine: AsyncEngine | None = None,
        limiter: trio.CapacityLimiter | None = None,
        loop: Any = None,
    ) -> None:
        self._dialect = dialect
        self._timeout = timeout
        self._driver = DriverCalls(
            dialect=dialect,
            timeout=timeout,
            engine=engine,
            async_engine=async_engine,
            limiter=limiter,
            loop=loop,
        )
        total = 0 if limiter is None else int(limiter.total_tokens)
        #: Calls not marked ``reserved`` take a token here first: they can never hold the
        #: last RESERVED_CONNECTIONS connections. None for a pool too small to spare them.
        self._shared = (
            trio.CapacityLimiter(total - RESERVED_CONNECTIONS)
            if total > RESERVED_CONNECTIONS
            else None
        )
        self._on_commit: dict[str, list[Callable[[], None]]] = {}
        #: Connections opened (a reconnect after a failover shows here) and calls that
        #: found the database unreachable; read by the metrics listener.
        self._stats = {"connections_opened": 0, "unavailable": 0, "replayed": 0}
        sync_engine = engine if engine is not None else getattr(async_engine, "sync_engine", None)
        #: The engine every statement runs on (a listener of its events sees them all).
        self.sync_engine: sa.Engine | None = sync_engine
        if sync_engine is not None:
            sa.event.listen(sync_engine, "connect", self._count_connect)
            sa.event.listen(sync_engine, "before_cursor_execute", mark_writes)

    def _count_connect(self, *_: object) -> None:
        self._stats["connections_opened"] += 1

    def statistics(self) -> dict[str, int]:
        """Counters since start: ``connections_opened``, ``unavailable``, ``replayed``."""
        return dict(self._stats)

    @property
    def dialect(self) -> str:
        """``sqlite``, ``postgresql`` or ``mysql`` (MariaDB included)."""
        return self._dialect

    @property
    def timeout(self) -> float:
        return self._timeout

    def on_commit(self, topic: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` (in trio) after each commit that asked for ``topic``."""
        self._on_commit.setdefault(topic, []).append(callback)

    async def run(
        self, fn: Callable[[sa.Connection], T], *, write: bool = False, reserved: bool = False
    ) -> T:
        """``fn(connection)`` in one transaction; ``write`` = it will write (SQLite locks
        early); ``reserved``: a read that may use the connections kept from everything
        else (the authorization engine's follow reads)."""
        begin = None
        if self._dialect == "sqlite":
            begin = "BEGIN IMMEDIATE" if write else "BEGIN"
        return await self._call(fn, begin=begin, mysql_lock=None, reserved=reserved)

    async def read(self, fn: Callable[[sa.Connection], T], *, reserved: bool = False) -> T:
        """``fn(connection)`` for a read that needs no transaction: ONE statement (or several
        that need no common snapshot), nothing written; ``reserved`` as for :meth:`run`.

        On PostgreSQL it runs in autocommit, which saves the BEGIN and COMMIT round trips
        of :meth:`run` (two of the three on a one-query read; setting autocommit is
        client-side with both drivers); elsewhere it is :meth:`run`.
        """
        if self._dialect != "postgresql":
            return await self.run(fn, reserved=reserved)
        return await self._call(
            fn, begin=None, mysql_lock=None, autocommit=True, tracked=False, reserved=reserved
        )

    async def write_one(self, fn: Callable[[sa.Connection], T]) -> T:
        """``fn(connection)`` for a write that is ONE statement, atomic by itself (a single
        INSERT). On PostgreSQL it runs in autocommit, which saves the BEGIN and COMMIT
        round trips of :meth:`run`; elsewhere it is :meth:`run` with ``write=True``."""
        if self._dialect != "postgresql":
            return await self.run(fn, write=True)
        # Each statement commits itself: a connection lost during it leaves the write's
        # fate unknown, so it is never replayed.
        return await self._call(fn, begin=None, mysql_lock=None, autocommit=True, replay=False)

    async def run_locked(
        self,
        lock_keys: str | Collection[str],
        fn: Callable[[sa.Connection], T],
        *,
        lock_wait: float | None = None,
    ) -> T:
        """Like :meth:`run`, holding the locks named by ``lock_keys`` across every instance
        (a user's email AND phone number, say: each is unique on its own).

        Several locks are taken in one global order, so two callers naming overlapping
        sets cannot deadlock. ``lock_wait`` bounds the wait for each lock on MySQL/MariaDB
        and PostgreSQL (default: the config's timeout; a caller's cancel scope stops it
        sooner on PostgreSQL), on SQLite the busy timeout does.
        """
        keys = [lock_keys] if isinstance(lock_keys, str) else list(lock_keys)
        if not keys:
            raise ValueError("run_locked needs at least one lock key")
        if self._dialect == "sqlite":  # one writer at a time: every lock at once
            return await self._call(fn, begin="BEGIN IMMEDIATE", mysql_lock=None)
        if self._dialect == "postgresql":
            ids = sorted({pg_lock_id(key) for key in keys})
            return await self._call(partial(pg_locked, ids, fn, lock_wait), None, None)
        names = tuple(sorted({mysql_lock_name(key) for key in keys}))
        lock = (names, lock_wait if lock_wait is not None else self._timeout)
        return await self._call(fn, begin=None, mysql_lock=lock)

    async def ping(self) -> None:
        """Raise :class:`StorageUnavailable` unless the database answers within the timeout."""
        try:
            with trio.fail_after(self._timeout):
                await self._call(
                    _select_one, begin=None, mysql_lock=None, abandon=True, tracked=False
                )
        except trio.TooSlowError:
            raise StorageUnavailable(f"the {self._dialect} database did not answer") from None
        except exc.DBAPIError as e:
            raise StorageUnavailable(f"the {self._dialect} database failed a ping") from e

    async def aclose(self) -> None:
        await self._driver.dispose()

    async def _call(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        abandon: bool = False,
        autocommit: bool = False,
        replay: bool = True,
        reserved: bool = False,
        tracked: bool = True,
    ) -> T:
        """``replay``: a connection lost before anything was committed (a pooled connection
        the database or a failover closed) is replaced and ``fn`` runs once more; the
        database rolled the lost transaction back, so nothing is written twice. A connection
        lost while committing is never replayed: whether it committed is unknown.
        ``tracked``: the call may write, so the request's deadline waits for it and learns
        whether it wrote (:mod:`bastion.storage.deadline`)."""
        # Every call but a reserved one holds a token of the shared part of the pool.
        shared = None if reserved or _RESERVED.get() else self._shared
        async with shared if shared is not None else nullcontext():
            ledger = current_ledger() if tracked else None
            if ledger is None:
                return await self._settled(fn, begin, mysql_lock, abandon, autocommit, replay)
            ledger.begin()
            wrote: list[bool] = []
            try:
                return await self._settled(
                    fn, begin, mysql_lock, abandon, autocommit, replay, wrote
                )
            finally:
                ledger.end(wrote=bool(wrote))

    async def _settled(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        abandon: bool,
        autocommit: bool,
        replay: bool,
        wrote: list[bool] | None = None,
    ) -> T:
        """The transaction, run to its end: replayed once if its connection was lost
        before the commit, again after a deadlock; the commit's topics notified (and a
        write reported in ``wrote``)."""
        try:
            attempt = 0
            while True:
                attempt += 1
                try:
                    result, topics = await self._driver.once(
                        fn, begin, mysql_lock, abandon, autocommit
                    )
                    break
                except LostBeforeCommit as lost:
                    if not replay:
                        raise lost.error from None
                    replay = False
                    self._stats["replayed"] += 1
                except exc.DBAPIError as e:
                    # The database chose this transaction as a deadlock's victim and rolled
                    # it back: running it again (after a random pause, so that the same
                    # contenders do not meet again) is what it asks for.
                    if attempt >= _DEADLOCK_ATTEMPTS or not deadlocked(e):
                        raise
                    await trio.sleep(random.uniform(0, _DEADLOCK_PAUSE * attempt))  # noqa: S311
        except StorageUnavailable:
            self._stats["unavailable"] += 1
            raise
        except exc.DBAPIError as e:
            if e.connection_invalidated:
                self._stats["unavailable"] += 1
                raise StorageUnavailable(
                    f"lost the connection to the {self._dialect} database"
                ) from e
            if timed_out(e) or deadlocked(e):
                self._stats["unavailable"] += 1
                raise StorageUnavailable(
                    f"the {self._dialect} database did not answer within {self._timeout:g}s"
                    if timed_out(e)
                    else f"the {self._dialect} database is busy (deadlocks)"
                ) from e
            raise
        if wrote is not None and WROTE in topics:
            wrote.append(True)
        for topic in topics:
            for callback in self._on_commit.get(topic, ()):
                callback()
        return result


def _select_one(conn: sa.Connection) -> None:
    conn.exec_driver_sql("SELECT 1").scalar_one()


@asynccontextmanager
async def open_database(config: StorageConfig) -> AsyncIterator[Database]:
    """A :class:`Database` for ``config``; PostgreSQL needs (or opens) a trio-asyncio loop."""
    url = sqlalchemy_url(config)
    dialect = dialect_of(config)
    pool = {
        "pool_size": config.pool_size,
        "max_overflow": 0,
        "pool_timeout": config.timeout,
        "pool_recycle": 1800,
    }
    if url.get_driver_name() == "asyncpg":
        async with asyncio_loop() as loop:
            async_engine = create_async_engine(url, connect_args=asyncpg_args(config), **pool)
            db = Database(
                dialect=dialect, timeout=config.timeout, async_engine=async_engine, loop=loop
            )
            try:
                yield db
            finally:
                with trio.CancelScope(shield=True):
                    await db.aclose()
        return
    if dialect == "sqlite":
        engine = sa.create_engine(url, **pool)
        configure_sqlite(engine, config.timeout)
    elif dialect == "postgresql":
        engine = sa.create_engine(url, connect_args=psycopg_args(config), **pool)
    else:
        engine = sa.create_engine(url, connect_args=pymysql_args(config), **pool)
    db = Database(
        dialect=dialect,
        timeout=config.timeout,
        engine=engine,
        limiter=trio.CapacityLimiter(config.pool_size),
    )
    try:
        yield db
    finally:
        with trio.CancelScope(shield=True):
            await db.aclose()


#: Connections of the pool only ``reserved`` calls may use (when the pool has more).
RESERVED_CONNECTIONS = 2
_RESERVED: ContextVar[bool] = ContextVar("bastion_reserved_connections", default=False)


@contextmanager
def reserved_connections() -> Iterator[None]:
    """Every database call made within (by this task) may use the reserved connections:
    for a route class a stalled table must not starve (authorization checks)."""
    token = _RESERVED.set(True)
    try:
        yield
    finally:
        _RESERVED.reset(token)


#: A transaction chosen as a deadlock's victim (PostgreSQL's SQLSTATE, MySQL's errno) is
#: run again, up to this many times in all.
_DEADLOCK_ATTEMPTS = 5
#: Seconds: the longest pause before a deadlocked transaction's next run, per attempt.
_DEADLOCK_PAUSE = 0.05
