"""One way to run SQL on every database: a sync function inside one transaction.

``Database.run(fn)`` calls ``fn(connection)`` (a SQLAlchemy Core ``Connection``) inside a
single transaction: committed when ``fn`` returns, rolled back when it raises. The same
``fn`` runs on every backend:

- SQLite and MySQL/MariaDB (pymysql): the sync engine, in a worker thread behind a
  ``trio.CapacityLimiter`` as large as the connection pool. SQLite runs in WAL mode with a
  busy timeout; write transactions start with ``BEGIN IMMEDIATE`` so read-modify-write
  never fails with "database is locked" halfway.
- PostgreSQL with psycopg (the default): the sync engine in a worker thread, like the
  others. A trio cancel scope abandons the thread and sends the server a cancel request for
  the query it is running; the thread then rolls back and returns its connection.
- PostgreSQL with asyncpg (``postgresql+asyncpg://``): under trio-asyncio, ``fn`` through
  ``AsyncConnection.run_sync``; a trio cancel scope cancels the query the same way.

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

``notify_on_commit(conn, topic)`` inside ``fn`` asks that the callbacks registered with
``Database.on_commit(topic, callback)`` run (in trio, in this process) once the transaction
has committed; a rolled-back transaction notifies nobody. The outbox uses it to wake its
worker as soon as an item it can run exists.
"""

from __future__ import annotations

import random
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar

import sqlalchemy as sa
import trio
import trio_asyncio  # type: ignore[import-untyped]
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bastion.storage.config import StorageConfig, dialect_of, sqlalchemy_url
from bastion.storage.deadline import current_ledger
from bastion.storage.errors import StorageUnavailable
from bastion.storage.sql.connect import (
    asyncio_loop,
    asyncpg_args,
    configure_sqlite,
    psycopg_args,
    pymysql_args,
)
from bastion.storage.sql.driver_errors import deadlocked, timed_out
from bastion.storage.sql.locks import (
    mysql_acquire,
    mysql_lock_name,
    mysql_release,
    pg_lock_id,
    pg_locked,
)

__all__ = [
    "Database",
    "notify_on_commit",
    "open_database",
    "reserved_connections",
]

T = TypeVar("T")

#: ``Connection.info`` key: the topics to notify once the current transaction commits.
_NOTIFY = "bastion.notify_on_commit"


#: The topic every transaction that ran a data-changing statement notifies: read back by
#: :meth:`Database._call` for the request's :class:`~bastion.storage.deadline.Ledger`.
_WROTE = "bastion.wrote"
_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "UPSERT")


def _mark_writes(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
    """``before_cursor_execute``: a data-changing statement marks its transaction."""
    if statement.lstrip()[:7].upper().startswith(_WRITE_VERBS):
        notify_on_commit(conn, _WROTE)


def notify_on_commit(conn: sa.Connection, topic: str) -> None:
    """Have ``topic``'s :meth:`Database.on_commit` callbacks run once this transaction commits."""
    conn.info.setdefault(_NOTIFY, set()).add(topic)


class _LostBeforeCommit(Exception):
    """The connection died while ``fn`` ran, before its transaction's commit was sent."""

    def __init__(self, error: exc.DBAPIError) -> None:
        super().__init__(str(error))
        self.error = error


def _before_commit(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``; a lost connection becomes :class:`_LostBeforeCommit`."""
    try:
        return fn(*args)
    except exc.DBAPIError as e:
        if e.connection_invalidated:
            raise _LostBeforeCommit(e) from e
        raise


def _take_topics(conn: sa.Connection | None) -> frozenset[str]:
    """The topics the finished transaction asked for, cleared: ``info`` outlives it.

    Only acted on after a commit. A connection the failure invalidated is left alone (its
    ``info`` would reconnect); it is discarded, and its ``info`` with it.
    """
    if conn is None or conn.invalidated:
        return frozenset()
    return frozenset(conn.info.pop(_NOTIFY, ()))


#: Errors that mean "could not reach the database" when opening a connection (including a
#: pool that stayed exhausted for the whole timeout).
_CONNECT_ERRORS = (exc.DBAPIError, exc.TimeoutError, OSError, TimeoutError)


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
        self._engine = engine
        self._async_engine = async_engine
        self._limiter = limiter
        total = 0 if limiter is None else int(limiter.total_tokens)
        #: Calls not marked ``reserved`` take a token here first: they can never hold the
        #: last RESERVED_CONNECTIONS connections. None for a pool too small to spare them.
        self._shared = (
            trio.CapacityLimiter(total - RESERVED_CONNECTIONS)
            if total > RESERVED_CONNECTIONS
            else None
        )
        self._loop = loop
        self._on_commit: dict[str, list[Callable[[], None]]] = {}
        #: Connections opened (a reconnect after a failover shows here) and calls that
        #: found the database unreachable; read by the metrics listener.
        self._stats = {"connections_opened": 0, "unavailable": 0, "replayed": 0}
        sync_engine = engine if engine is not None else getattr(async_engine, "sync_engine", None)
        #: The engine every statement runs on (a listener of its events sees them all).
        self.sync_engine: sa.Engine | None = sync_engine
        if sync_engine is not None:
            sa.event.listen(sync_engine, "connect", self._count_connect)
            sa.event.listen(sync_engine, "before_cursor_execute", _mark_writes)

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
        if self._async_engine is not None:
            await trio_asyncio.aio_as_trio(self._async_engine.dispose, loop=self._loop)()
        if self._engine is not None:
            await self._threads_finished()
            await trio.to_thread.run_sync(self._engine.dispose)

    async def _threads_finished(self) -> None:
        """Wait (at most the timeout) for calls whose callers were cancelled: their threads
        still hold connections, which must be back in the pool before it is disposed, or
        they are never closed. Each holds a limiter token until it reports back, so taking
        every token waits for them all (and keeps any new call from starting)."""
        assert self._limiter is not None
        with trio.move_on_after(self._timeout):
            for _ in range(int(self._limiter.total_tokens)):
                await self._limiter.acquire_on_behalf_of(object())

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
                    result, topics = await self._call_once(
                        fn, begin, mysql_lock, abandon, autocommit
                    )
                    break
                except _LostBeforeCommit as lost:
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
        if wrote is not None and _WROTE in topics:
            wrote.append(True)
        for topic in topics:
            for callback in self._on_commit.get(topic, ()):
                callback()
        return result

    async def _call_once(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        abandon: bool,
        autocommit: bool,
    ) -> tuple[T, frozenset[str]]:
        if self._async_engine is not None:
            run_async = trio_asyncio.aio_as_trio(self._call_asyncio, loop=self._loop)
            return await run_async(fn, autocommit)  # type: ignore[no-any-return]
        if self._dialect == "postgresql":
            return await self._call_cancellable(fn, autocommit)
        return await trio.to_thread.run_sync(
            self._call_sync, fn, begin, mysql_lock, abandon_on_cancel=abandon, limiter=self._limiter
        )

    async def _call_cancellable(
        self, fn: Callable[[sa.Connection], T], autocommit: bool
    ) -> tuple[T, frozenset[str]]:
        """:meth:`_call_sync` on PostgreSQL: a cancelled caller stops waiting at once, and
        the query its thread is running is cancelled on the server."""
        running = _RunningQuery()
        try:
            return await trio.to_thread.run_sync(
                partial(self._call_sync, fn, None, None, autocommit=autocommit, running=running),
                abandon_on_cancel=True,
                limiter=self._limiter,
            )
        except trio.Cancelled:
            trio.lowlevel.start_thread_soon(
                partial(running.cancel, self._timeout), lambda _outcome: None
            )
            raise

    def _call_sync(
        self,
        fn: Callable[[sa.Connection], T],
        begin: str | None,
        mysql_lock: tuple[tuple[str, ...], float] | None,
        *,
        autocommit: bool = False,
        running: _RunningQuery | None = None,
    ) -> tuple[T, frozenset[str]]:
        assert self._engine is not None
        try:
            conn = self._engine.connect()
        except _CONNECT_ERRORS as e:
            raise self._unreachable(e) from e
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
                topics = _take_topics(conn)
                if mysql_lock is not None:
                    mysql_release(conn, mysql_lock[0])
            return result, topics

    async def _call_asyncio(
        self, fn: Callable[[sa.Connection], T], autocommit: bool
    ) -> tuple[T, frozenset[str]]:
        assert self._async_engine is not None
        conn = self._async_engine.connect()
        try:
            await conn.start()
        except _CONNECT_ERRORS as e:
            raise self._unreachable(e) from e
        try:
            if autocommit:
                # Client-side only with asyncpg (no round trip); reset when pooled again.
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                result = await conn.run_sync(lambda sync: _before_commit(fn, sync))
            else:
                async with conn.begin():
                    result = await conn.run_sync(lambda sync: _before_commit(fn, sync))
        finally:
            topics = _take_topics(conn.sync_connection)
            await conn.close()
        return result, topics

    def _unreachable(self, cause: BaseException) -> StorageUnavailable:
        """Names the cause as the driver gave it (connection refused, no such database,
        access denied ...), on one line, the password never in it."""
        inner = getattr(cause, "orig", None) or cause
        text = " ".join(str(inner).split()) or type(inner).__name__
        engine = (
            self._engine
            if self._engine is not None
            else getattr(self._async_engine, "sync_engine", None)
        )
        password = engine.url.password if engine is not None else None
        if password:
            text = text.replace(str(password), "***")
        return StorageUnavailable(f"cannot connect to the {self._dialect} database: {text[:300]}")


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
