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

import time
from collections.abc import Callable, Sequence
from typing import Protocol

import sqlalchemy as sa

from bastion.core.fga.tuples import MemoryTupleReader, TupleKey, split_object
from bastion.storage import fga_statements as statements
from bastion.storage.fga_reads import (
    Fetched,
    Head,
    Read,
    fetch_memory,
    fetch_sql,
    key_from_row,
    key_hash,
)
from bastion.storage.fga_types import (
    MAX_REPLAY,
    Change,
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
    TuplePage,
    WriteOptions,
    decode_token,
    encode_token,
)
from bastion.storage.fga_writes import queue_for
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import DEFAULT_FGA_STORE

__all__ = [
    "MAX_REPLAY",
    "WRITE_LOCK",
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

#: The lock every writer of the store takes, on every instance.
WRITE_LOCK = "bastion:fga:write"


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
        return await self.db.run(
            lambda conn: statements.max_revision(conn, self.store_id), reserved=True
        )

    async def changes_since(self, revision: int) -> list[Change] | None:
        return await self.db.run(
            lambda conn: statements.changes_since(self.store_id, revision, conn), reserved=True
        )

    async def head(self) -> Head:
        def read(conn: sa.Connection) -> Head:
            return Head(statements.max_revision(conn, sid), statements.latest_model(conn, sid))

        sid = self.store_id
        return await self.db.run(read, reserved=True)

    async def fetch(self, reads: Sequence[Read]) -> Fetched:
        def read(conn: sa.Connection) -> Fetched:
            return fetch_sql(conn, sid, reads, statements.max_revision(conn, sid))

        sid = self.store_id
        # No common snapshot needed: each query sees at least the revision read first.
        return await self.db.read(read, reserved=True)

    async def write_model(self, model: StoredModel) -> int:
        now, sid = self._now(), self.store_id
        return await self.db.run_locked(
            WRITE_LOCK, lambda conn: statements.write_model(sid, model, now, conn)
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
            lambda conn: statements.write(sid, writes, deletes, options, now, conn),
            savepoint=bool(writes and deletes),
            own_errors=(TupleConflict,),
        )

    async def read_tuples(self, where: TupleFilter, page_size: int, token: str) -> TuplePage:
        after = decode_token(token) if token else 0
        sid = self.store_id
        rows, last = await self.db.run(
            lambda conn: statements.read_page(sid, where, page_size, after, conn)
        )
        keys = [key_from_row(r) for r in rows]
        token = "" if last is None else encode_token(last)
        return TuplePage(keys, token, [r.created_at for r in rows])

    async def reset(self) -> int:
        now, sid = self._now(), self.store_id
        return await self.db.run_locked(WRITE_LOCK, lambda conn: statements.reset(sid, now, conn))


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
