"""The authorization engine's stores (OpenFGA's ``/stores``), each isolated from the others:
the registry, and what OpenFGA's API reads beyond the engine's view of one store (model
versions, the changelog as ``/changes``, assertions).

:class:`SqlFgaStores` keeps them in the database beside the default store, which the
Authorizer-shaped API uses (``DEFAULT_FGA_STORE``, created by migration 0010);
:class:`MemoryFgaStores` in this process. A store's view is an :class:`~storage.fga.FgaStore`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import sqlalchemy as sa

from bastion.storage.fga import (
    WRITE_LOCK,
    Change,
    FgaStore,
    MemoryFgaStore,
    SqlFgaStore,
    decode_token,
    encode_token,
)
from bastion.storage.fga_generation import GatedFgaStore, Generations
from bastion.storage.fga_partitions import drop_own_partition
from bastion.storage.fga_reads import key_from_row
from bastion.storage.fga_replica import ReplicaReads, ReplicatedFgaStore
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import (
    DEFAULT_FGA_STORE,
    fga_assertions,
    fga_changelog,
    fga_models,
    fga_stores,
    fga_tuples,
)

__all__ = [
    "DEFAULT_FGA_STORE",
    "FgaStores",
    "MemoryFgaStores",
    "ModelVersion",
    "Page",
    "SqlFgaStores",
    "StoreInfo",
]


@dataclass(frozen=True, slots=True)
class StoreInfo:
    id: str
    name: str
    created_at: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class ModelVersion:
    id: str
    dsl: str
    created_at: int


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: Sequence[T]
    #: Opaque; empty when there is nothing more (``/changes``: where to poll from next).
    continuation_token: str


def _offset(token: str) -> int:
    return decode_token(token) if token else 0


class FgaStores(Protocol):
    """Every store; methods taking a ``store_id`` expect one that exists (``get``)."""

    #: The read replica the stores' views follow (``--database-replica-url``), if any.
    replica: ReplicaReads | None
    #: Where the stores' writes are announced (Redis as the memory store), if anywhere.
    generations: Generations | None

    def store(self, store_id: str) -> FgaStore: ...

    async def create(self, store_id: str, name: str) -> StoreInfo: ...

    async def get(self, store_id: str) -> StoreInfo | None: ...

    async def list_stores(self, page_size: int, token: str, name: str = "") -> Page[StoreInfo]:
        """Oldest first; raises ``ValueError`` for a bad token."""
        ...

    async def delete(self, store_id: str) -> None: ...

    async def models(self, store_id: str, page_size: int, token: str) -> Page[ModelVersion]:
        """Newest first; raises ``ValueError`` for a bad token."""
        ...

    async def model(self, store_id: str, model_id: str) -> ModelVersion | None: ...

    async def changes(
        self, store_id: str, object_type: str, page_size: int, token: str
    ) -> Page[Change]:
        """Tuple writes and deletes in order; raises ``ValueError`` for a bad token."""
        ...

    async def assertions(self, store_id: str, model_id: str) -> list[Any]: ...

    async def write_assertions(self, store_id: str, model_id: str, value: list[Any]) -> None: ...


# ---------------------------------------------------------------- SQL


def _store(row: Any) -> StoreInfo:
    return StoreInfo(row.id, row.name, row.created_at, row.updated_at)


def _delete_store(store_id: str, conn: sa.Connection) -> None:
    if conn.dialect.name == "postgresql":
        drop_own_partition(conn, store_id)  # its tuples at once, not row by row
    for table in (fga_tuples, fga_models, fga_changelog, fga_assertions):
        conn.execute(sa.delete(table).where(table.c.store_id == store_id))
    conn.execute(sa.delete(fga_stores).where(fga_stores.c.id == store_id))


def _changes(
    store_id: str, object_type: str, page_size: int, after: int, conn: sa.Connection
) -> list[Change]:
    log = fga_changelog.c
    query = sa.select(fga_changelog).where(
        log.store_id == store_id, log.revision > after, log.operation.in_(("write", "delete"))
    )
    if object_type:
        query = query.where(log.object.startswith(f"{object_type}:", autoescape=True))
    rows = conn.execute(query.order_by(log.revision).limit(page_size)).all()
    return [
        Change(r.revision, r.operation, key=key_from_row(r), created_at=r.created_at) for r in rows
    ]


def _write_assertions(store_id: str, model_id: str, text: str, conn: sa.Connection) -> None:
    table = fga_assertions
    where = (table.c.store_id == store_id, table.c.model_id == model_id)
    conn.execute(sa.delete(table).where(*where))
    conn.execute(sa.insert(table).values(store_id=store_id, model_id=model_id, assertions=text))


class SqlFgaStores:
    """``replica``: each store's view follows it there (:mod:`storage.fga_replica`);
    ``generations``: each store's writes are announced there, and without a replica the
    engine reads the revision only when they say it may have moved
    (:mod:`storage.fga_generation`)."""

    def __init__(
        self,
        db: Database,
        clock: Callable[[], float] = time.time,
        *,
        replica: ReplicaReads | None = None,
        generations: Generations | None = None,
    ) -> None:
        self.db = db
        self.replica = replica
        self.generations = generations
        self._clock = clock

    def store(self, store_id: str) -> FgaStore:
        primary: FgaStore = SqlFgaStore(self.db, self._clock, store_id=store_id)
        if self.generations is not None:
            primary = GatedFgaStore(primary, self.generations, store_id)
        if self.replica is None:
            return primary
        follower = SqlFgaStore(self.replica.db, self._clock, store_id=store_id)
        return ReplicatedFgaStore(primary, follower, self.replica)

    async def create(self, store_id: str, name: str) -> StoreInfo:
        now = int(self._clock())
        row = {"id": store_id, "name": name, "created_at": now, "updated_at": now}
        await self.db.run(
            lambda conn: conn.execute(sa.insert(fga_stores).values(**row)), write=True
        )
        return StoreInfo(store_id, name, now, now)

    async def get(self, store_id: str) -> StoreInfo | None:
        query = sa.select(fga_stores).where(fga_stores.c.id == store_id)
        row = await self.db.run(lambda conn: conn.execute(query).first())
        return None if row is None else _store(row)

    async def list_stores(self, page_size: int, token: str, name: str = "") -> Page[StoreInfo]:
        offset = _offset(token)
        query = sa.select(fga_stores).order_by(fga_stores.c.created_at, fga_stores.c.id)
        if name:
            query = query.where(fga_stores.c.name == name)
        query = query.offset(offset).limit(page_size + 1)
        rows = await self.db.run(lambda conn: conn.execute(query).all())
        more = len(rows) > page_size
        found = [_store(r) for r in rows[:page_size]]
        return Page(found, encode_token(offset + page_size) if more else "")

    async def delete(self, store_id: str) -> None:
        await self.db.run_locked(WRITE_LOCK, lambda conn: _delete_store(store_id, conn))

    async def models(self, store_id: str, page_size: int, token: str) -> Page[ModelVersion]:
        offset = _offset(token)
        m = fga_models.c
        query = (
            sa.select(m.id, m.dsl, m.created_at)
            .where(m.store_id == store_id)
            .order_by(m.revision.desc())
            .offset(offset)
            .limit(page_size + 1)
        )
        rows = await self.db.run(lambda conn: conn.execute(query).all())
        more = len(rows) > page_size
        found = [ModelVersion(r.id, r.dsl, r.created_at) for r in rows[:page_size]]
        return Page(found, encode_token(offset + page_size) if more else "")

    async def model(self, store_id: str, model_id: str) -> ModelVersion | None:
        m = fga_models.c
        query = sa.select(m.id, m.dsl, m.created_at).where(m.store_id == store_id, m.id == model_id)
        row = await self.db.run(lambda conn: conn.execute(query).first())
        return None if row is None else ModelVersion(row.id, row.dsl, row.created_at)

    async def changes(
        self, store_id: str, object_type: str, page_size: int, token: str
    ) -> Page[Change]:
        after = _offset(token)
        found = await self.db.run(
            lambda conn: _changes(store_id, object_type, page_size, after, conn)
        )
        return Page(found, encode_token(found[-1].revision) if found else token)

    async def assertions(self, store_id: str, model_id: str) -> list[Any]:
        a = fga_assertions.c
        query = sa.select(a.assertions).where(a.store_id == store_id, a.model_id == model_id)
        text = await self.db.run(lambda conn: conn.execute(query).scalar())
        return [] if text is None else list(json.loads(text))

    async def write_assertions(self, store_id: str, model_id: str, value: list[Any]) -> None:
        text = json.dumps(value)
        await self.db.run(
            lambda conn: _write_assertions(store_id, model_id, text, conn), write=True
        )


# ---------------------------------------------------------------- this process only


class MemoryFgaStores:
    """The same contract in this process's memory; the default store exists from the start."""

    replica: ReplicaReads | None = None
    generations: Generations | None = None

    def __init__(self) -> None:
        now = int(time.time())
        self._infos = {DEFAULT_FGA_STORE: StoreInfo(DEFAULT_FGA_STORE, "default", now, now)}
        self._stores = {DEFAULT_FGA_STORE: MemoryFgaStore()}
        self._assertions: dict[tuple[str, str], list[Any]] = {}

    def store(self, store_id: str) -> FgaStore:
        return self._stores[store_id]

    async def create(self, store_id: str, name: str) -> StoreInfo:
        now = int(time.time())
        self._infos[store_id] = info = StoreInfo(store_id, name, now, now)
        self._stores[store_id] = MemoryFgaStore()
        return info

    async def get(self, store_id: str) -> StoreInfo | None:
        return self._infos.get(store_id)

    async def list_stores(self, page_size: int, token: str, name: str = "") -> Page[StoreInfo]:
        offset = _offset(token)
        infos = sorted(self._infos.values(), key=lambda i: (i.created_at, i.id))
        infos = [i for i in infos if not name or i.name == name]
        more = len(infos) > offset + page_size
        found = infos[offset : offset + page_size]
        return Page(found, encode_token(offset + page_size) if more else "")

    async def delete(self, store_id: str) -> None:
        self._infos.pop(store_id, None)
        self._stores.pop(store_id, None)
        for key in [k for k in self._assertions if k[0] == store_id]:
            del self._assertions[key]

    def _log(self, store_id: str) -> list[Change]:
        return list(self._stores[store_id]._log)

    async def models(self, store_id: str, page_size: int, token: str) -> Page[ModelVersion]:
        offset = _offset(token)
        versions = [
            ModelVersion(c.model.id, c.model.dsl, c.created_at)
            for c in reversed(self._log(store_id))
            if c.model is not None
        ]
        more = len(versions) > offset + page_size
        found = versions[offset : offset + page_size]
        return Page(found, encode_token(offset + page_size) if more else "")

    async def model(self, store_id: str, model_id: str) -> ModelVersion | None:
        for change in self._log(store_id):
            if change.model is not None and change.model.id == model_id:
                return ModelVersion(model_id, change.model.dsl, change.created_at)
        return None

    async def changes(
        self, store_id: str, object_type: str, page_size: int, token: str
    ) -> Page[Change]:
        after = _offset(token)
        found = [
            c
            for c in self._log(store_id)
            if c.revision > after
            and c.key is not None
            and (not object_type or c.key.object.startswith(f"{object_type}:"))
        ][:page_size]
        return Page(found, encode_token(found[-1].revision) if found else token)

    async def assertions(self, store_id: str, model_id: str) -> list[Any]:
        return list(self._assertions.get((store_id, model_id), []))

    async def write_assertions(self, store_id: str, model_id: str, value: list[Any]) -> None:
        self._assertions[(store_id, model_id)] = list(value)
