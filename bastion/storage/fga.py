"""The authorization engine's store: model versions, relationship tuples and a changelog.

Every change (a tuple written or deleted, a model installed, a reset) takes the next
*revision* and leaves a changelog row carrying it; the store's revision is the highest
one. Writers serialise on one lock (``Database.run_locked``: PostgreSQL advisory lock,
MariaDB ``GET_LOCK``, SQLite's single writer), so revisions become visible in order: a
reader that has seen revision ``r`` and then reads every row past ``r`` misses nothing.
That is what lets each server process cache what it reads and stay exact: compare the
revision (one indexed ``max``), and replay the rows past it when it moved
(:meth:`FgaStore.changes_since`), or start over from :meth:`FgaStore.head` when the rows
are gone (after a reset) or too many. The engine's tuple reads are
:meth:`FgaStore.fetch` (:mod:`storage.fga_reads`).

Two implementations: :class:`SqlFgaStore` (SQLite, PostgreSQL, MySQL/MariaDB; the main
database by default) and :class:`MemoryFgaStore` (this process only, for development and
tests). Tuples are not bound to a model; the engine filters them through the current one.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from bastion.core.fga.tuples import MemoryTupleReader, TupleKey, split_object
from bastion.storage.fga_reads import (
    Fetched,
    Head,
    Read,
    fetch_memory,
    fetch_sql,
    key_from_row,
    key_hash,
)
from bastion.storage.fga_writes import queue_for
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import DEFAULT_FGA_STORE, fga_changelog, fga_models, fga_tuples

__all__ = [
    "MAX_REPLAY",
    "Change",
    "Fetched",
    "FgaStore",
    "Head",
    "MemoryFgaStore",
    "Read",
    "SqlFgaStore",
    "StoreNotEmpty",
    "StoredModel",
    "TupleConflict",
    "TupleFilter",
    "TuplePage",
    "WriteOptions",
    "decode_token",
    "encode_token",
]

#: A process further behind than this many changes starts its cache over instead of replaying.
MAX_REPLAY = 10_000
#: The lock every writer of the store takes, on every instance.
WRITE_LOCK = "bastion:fga:write"
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class StoredModel:
    id: str
    dsl: str


@dataclass(frozen=True, slots=True)
class Change:
    """One changelog row: ``operation`` is ``write``, ``delete``, ``model`` or ``reset``."""

    revision: int
    operation: str
    key: TupleKey | None = None
    model: StoredModel | None = None
    #: Unix seconds; OpenFGA's ``/changes`` shows it.
    created_at: int = 0


@dataclass(frozen=True, slots=True)
class TupleFilter:
    """Read filters; each empty part matches anything. ``object`` may be ``type:`` alone."""

    user: str = ""
    relation: str = ""
    object: str = ""


@dataclass(frozen=True, slots=True)
class TuplePage:
    tuples: Sequence[TupleKey]
    #: Opaque; empty when there is nothing more.
    continuation_token: str
    #: When each tuple was written (Unix seconds), in the order of ``tuples``.
    written_at: Sequence[int] = ()


class TupleConflict(Exception):
    """A write of an existing tuple (``exists``) or a delete of a missing one."""

    def __init__(self, key: TupleKey, *, exists: bool) -> None:
        super().__init__(str(key))
        self.key = key
        self.exists = exists


class StoreNotEmpty(Exception):
    """Reset refused: tuples remain."""


#: The largest position a token may name: SQL's 64-bit ``bigint``.
MAX_POSITION = 2**63 - 1


def encode_token(last_id: int) -> str:
    return base64.urlsafe_b64encode(str(last_id).encode()).decode()


def decode_token(token: str) -> int:
    """The position a token names; raises ``ValueError`` for anything we did not issue."""
    try:
        value = int(base64.urlsafe_b64decode(token.encode()).decode())
    except (binascii.Error, UnicodeError, ValueError):
        raise ValueError("invalid continuation token") from None
    if not 0 <= value <= MAX_POSITION:  # a position past bigint overflows every database
        raise ValueError("invalid continuation token")
    return value


class FgaStore(Protocol):
    #: ``sqlite``, ``postgresql``, ``mysql`` or ``memory``.
    backend: str

    async def revision(self) -> int: ...

    async def changes_since(self, revision: int) -> list[Change] | None:
        """Changes past ``revision`` in order; ``None`` when they are gone (a reset) or
        too many: the reader starts over from :meth:`head`."""
        ...

    async def head(self) -> Head:
        """The revision and the latest model, without a tuple."""
        ...

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        """Reader questions answered together (:mod:`storage.fga_reads`)."""
        ...

    async def write_model(self, model: StoredModel) -> int: ...

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = ...,
    ) -> int:
        """Apply all or nothing; raises :class:`TupleConflict` (unless ``options`` say to
        skip it). Returns the new revision."""
        ...

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        """Raises ``ValueError`` for a bad token."""
        ...

    async def reset(self) -> int:
        """Drop every model version; raises :class:`StoreNotEmpty` while tuples exist."""
        ...


# ---------------------------------------------------------------- SQL


def _context_json(key: TupleKey) -> str | None:
    return None if key.context is None else json.dumps(dict(key.context), sort_keys=True)


#: Built once: every request asks it, and building the statement each time cost a third of
#: the probe's CPU time on SQLite.
_MAX_REVISION = sa.select(sa.func.max(fga_changelog.c.revision)).where(
    fga_changelog.c.store_id == sa.bindparam("store_id")
)


def _max_revision(conn: sa.Connection, store_id: str) -> int:
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
            "condition_context": _context_json(k),
            "created_at": now,
        }
        for i, k in enumerate(keys, 1)
    ]


def _condition_of(key: TupleKey) -> tuple[str | None, str | None]:
    return key.condition or None, _context_json(key)


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
    types = {column.name: column.type.compile(dialect=postgresql.dialect()) for column in table.c}
    columns = ", ".join(f'"{n}"' for n in names)
    arrays = ", ".join(f"CAST(:{n} AS {types[n]}[])" for n in names)
    return sa.text(f"INSERT INTO {table.name} ({columns}) SELECT * FROM unnest({arrays})")  # noqa: S608


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """OpenFGA's ``on_duplicate: ignore`` / ``on_missing: ignore``: skip instead of failing."""

    #: Skip a write of a tuple stored as it is (the same condition and context).
    ignore_existing: bool = False
    ignore_missing: bool = False


def _write(
    store_id: str,
    writes: Sequence[TupleKey],
    deletes: Sequence[TupleKey],
    options: WriteOptions,
    now: int,
    conn: sa.Connection,
) -> int:
    revision = _max_revision(conn, store_id)
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
            kept = [
                (k, h)
                for k, h in zip(writes, write_hashes, strict=True)
                if present.get(h) != _condition_of(k)
            ]
            writes, write_hashes = [k for k, _ in kept], [h for _, h in kept]
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
                    "condition_context": _context_json(k),
                    "created_at": now,
                }
                for k, digest in zip(writes, write_hashes, strict=True)
            ],
        )
        rows = _log_rows(store_id, revision, "write", writes, now)
        _insert_rows(conn, fga_changelog, rows)
        revision += len(writes)
    return revision


def _write_model(store_id: str, model: StoredModel, now: int, conn: sa.Connection) -> int:
    revision = _max_revision(conn, store_id) + 1
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


def _reset(store_id: str, now: int, conn: sa.Connection) -> int:
    mine = fga_tuples.c.store_id == store_id
    if conn.execute(sa.select(fga_tuples.c.id).where(mine).limit(1)).first() is not None:
        raise StoreNotEmpty()
    revision = _max_revision(conn, store_id) + 1
    conn.execute(sa.delete(fga_models).where(fga_models.c.store_id == store_id))
    conn.execute(sa.delete(fga_changelog).where(fga_changelog.c.store_id == store_id))
    conn.execute(
        sa.insert(fga_changelog).values(
            store_id=store_id, revision=revision, operation="reset", created_at=now
        )
    )
    return revision


def _latest_model(conn: sa.Connection, store_id: str) -> StoredModel | None:
    row = conn.execute(
        sa.select(fga_models.c.id, fga_models.c.dsl)
        .where(fga_models.c.store_id == store_id)
        .order_by(fga_models.c.revision.desc())
        .limit(1)
    ).first()
    return None if row is None else StoredModel(row.id, row.dsl)


def _changes_since(store_id: str, since: int, conn: sa.Connection) -> list[Change] | None:
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


def _read(
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


class SqlFgaStore:
    """One store (``store_id``) of the database's stores; the default one unless named."""

    def __init__(
        self,
        db: Database,
        clock: Callable[[], float] = time.time,
        *,
        store_id: str = DEFAULT_FGA_STORE,
    ) -> None:
        self.db = db
        self.backend = db.dialect
        self.store_id = store_id
        self._clock = clock

    def _now(self) -> int:
        return int(self._clock())

    async def revision(self) -> int:
        return await self.db.run(lambda conn: _max_revision(conn, self.store_id), reserved=True)

    async def changes_since(self, revision: int) -> list[Change] | None:
        return await self.db.run(
            lambda conn: _changes_since(self.store_id, revision, conn), reserved=True
        )

    async def head(self) -> Head:
        def read(conn: sa.Connection) -> Head:
            return Head(_max_revision(conn, sid), _latest_model(conn, sid))

        sid = self.store_id
        return await self.db.run(read, reserved=True)

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        def read(conn: sa.Connection) -> Fetched:
            return fetch_sql(conn, sid, reads, _max_revision(conn, sid))

        sid = self.store_id
        # No common snapshot needed: each query sees at least the revision read first.
        return await self.db.read(read, reserved=True)

    async def write_model(self, model: StoredModel) -> int:
        now, sid = self._now(), self.store_id
        return await self.db.run_locked(
            WRITE_LOCK, lambda conn: _write_model(sid, model, now, conn)
        )

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = WriteOptions(),
    ) -> int:
        now, sid = self._now(), self.store_id
        # Committed together with the writes of this process queued meanwhile.
        return await queue_for(self.db, WRITE_LOCK).run(
            lambda conn: _write(sid, writes, deletes, options, now, conn),
            savepoint=bool(writes and deletes),
            own_errors=(TupleConflict,),
        )

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        after = decode_token(token) if token else 0
        sid = self.store_id
        rows, last = await self.db.run(lambda conn: _read(sid, where, page_size, after, conn))
        keys = [key_from_row(r) for r in rows]
        token = "" if last is None else encode_token(last)
        return TuplePage(keys, token, [r.created_at for r in rows])

    async def reset(self) -> int:
        now, sid = self._now(), self.store_id
        return await self.db.run_locked(WRITE_LOCK, lambda conn: _reset(sid, now, conn))


# ---------------------------------------------------------------- this process only


class MemoryFgaStore:
    """The same contract in this process's memory (``--fga-store=memory``)."""

    backend = "memory"

    def __init__(self) -> None:
        self._models: list[tuple[int, StoredModel]] = []
        #: key hash -> (position, key); positions order Read's pages.
        self._tuples: dict[str, tuple[int, TupleKey]] = {}
        self._written_at: dict[int, int] = {}
        self._position = 0
        self._log: list[Change] = []
        self._revision = 0
        #: The same tuples, indexed for :meth:`fetch`.
        self._index = MemoryTupleReader()

    async def revision(self) -> int:
        return self._revision

    async def changes_since(self, revision: int) -> list[Change] | None:
        changes = [c for c in self._log if c.revision > revision]
        if len(changes) > MAX_REPLAY or (changes and changes[0].revision != revision + 1):
            return None
        return changes

    async def head(self) -> Head:
        return Head(self._revision, self._models[-1][1] if self._models else None)

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        return fetch_memory(self._index, reads, self._revision)

    async def write_model(self, model: StoredModel) -> int:
        self._revision += 1
        self._models.append((self._revision, model))
        self._log.append(Change(self._revision, "model", model=model, created_at=int(time.time())))
        return self._revision

    async def write_tuples(
        self,
        writes: Sequence[TupleKey],
        deletes: Sequence[TupleKey] = (),
        options: WriteOptions = WriteOptions(),
    ) -> int:
        if options.ignore_missing:
            deletes = [k for k in deletes if key_hash(k) in self._tuples]
        for key in deletes:
            if key_hash(key) not in self._tuples:
                raise TupleConflict(key, exists=False)
        remaining = set(self._tuples) - {key_hash(k) for k in deletes}
        if options.ignore_existing:
            writes = [
                k
                for k in writes
                if key_hash(k) not in remaining or self._tuples[key_hash(k)][1] != k
            ]
        for key in writes:
            if key_hash(key) in remaining:
                raise TupleConflict(key, exists=True)
        now = int(time.time())
        for key in deletes:
            del self._tuples[key_hash(key)]
            self._index.delete(key)
            self._revision += 1
            self._log.append(Change(self._revision, "delete", key=key, created_at=now))
        for key in writes:
            self._position += 1
            self._tuples[key_hash(key)] = (self._position, key)
            self._index.write(key)
            self._written_at[self._position] = now
            self._revision += 1
            self._log.append(Change(self._revision, "write", key=key, created_at=now))
        return self._revision

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        after = decode_token(token) if token else 0
        object_type, object_id = split_object(where.object)
        found: list[tuple[int, TupleKey]] = []
        for position, key in sorted(self._tuples.values(), key=lambda item: item[0]):
            if position <= after or (where.user and key.user != where.user):
                continue
            if where.relation and key.relation != where.relation:
                continue
            if where.object and (
                key.object != where.object
                if object_id
                else split_object(key.object)[0] != object_type
            ):
                continue
            found.append((position, key))
            if len(found) > page_size:
                break
        more = len(found) > page_size
        found = found[:page_size]
        token = encode_token(found[-1][0]) if more else ""
        written = [self._written_at.get(p, 0) for p, _ in found]
        return TuplePage([k for _, k in found], token, written)

    async def reset(self) -> int:
        if self._tuples:
            raise StoreNotEmpty()
        self._revision += 1
        self._models.clear()
        self._log = [Change(self._revision, "reset")]
        return self._revision
