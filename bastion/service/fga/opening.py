"""Where the authorization engine keeps its stores, from ``--fga-store`` / ``--fga-store-url``.

Default (no ``--fga-store``): the main SQL database, whose migrations already created the
tables. ``none`` switches the engine off; ``memory`` keeps everything in this process
(one instance only). ``sqlite``, ``postgres`` or ``mysql`` with ``--fga-store-url`` open
(and migrate) a database of its own; without a URL they name the main database.
``--database-replica-url`` names a read replica of the main database for the engine's
reads (:mod:`storage.fga_replica`); it is opened lazily, so a replica down at start is
only a replica down. With Redis as the memory store, the SQL stores' writes announce a new
generation there, which spares the engine its revision read while nothing changed
(:mod:`storage.fga_generation`); the SQL memory store lives in the database that the
revision is read from anyway, and ``memory://`` is one process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bastion.core.settings import Settings
from bastion.storage import Storage, StorageConfig
from bastion.storage.fga_generation import Generations
from bastion.storage.fga_replica import ReplicaReads
from bastion.storage.fga_stores import FgaStores, MemoryFgaStores, SqlFgaStores
from bastion.storage.memory import RedisMemoryStore
from bastion.storage.sql import migrate, open_database

__all__ = ["open_fga_store"]


@asynccontextmanager
async def open_fga_store(settings: Settings, storage: Storage) -> AsyncIterator[FgaStores | None]:
    kind = settings.fga_store
    generations = (
        Generations(storage.memory.client) if isinstance(storage.memory, RedisMemoryStore) else None
    )
    if kind == "none":
        yield None
    elif kind == "memory":
        yield MemoryFgaStores()
    elif not settings.fga_store_url and settings.database_replica_url:
        async with open_database(_replica_config(settings, storage)) as replica:
            yield SqlFgaStores(storage.db, replica=ReplicaReads(replica), generations=generations)
    elif not settings.fga_store_url:
        yield SqlFgaStores(storage.db, generations=generations)
    else:
        config = StorageConfig(
            database_type=kind, database_url=settings.fga_store_url, timeout=storage.timeout
        )
        async with open_database(config) as db:
            await migrate(db)
            yield SqlFgaStores(db, generations=generations)


def _replica_config(settings: Settings, storage: Storage) -> StorageConfig:
    """The main database's type and TLS files; half the timeout, so that a replica too
    slow to answer leaves the request time to ask the primary."""
    return StorageConfig(
        database_type=settings.database_type,
        database_url=settings.database_replica_url,
        database_cert=settings.database_cert,
        database_ca_cert=settings.database_ca_cert,
        database_cert_key=settings.database_cert_key,
        run_migrations=False,
        timeout=storage.timeout / 2,
    )
