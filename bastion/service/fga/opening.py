"""Where the authorization engine keeps its stores, from ``--fga-store`` / ``--fga-store-url``.

Default (no ``--fga-store``): the main SQL database, whose migrations already created the
tables. ``none`` switches the engine off; ``memory`` keeps everything in this process
(one instance only). ``sqlite``, ``postgres`` or ``mysql`` with ``--fga-store-url`` open
(and migrate) a database of its own; without a URL they name the main database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bastion.core.settings import Settings
from bastion.storage import Storage, StorageConfig
from bastion.storage.fga_stores import FgaStores, MemoryFgaStores, SqlFgaStores
from bastion.storage.sql import migrate, open_database

__all__ = ["open_fga_store"]


@asynccontextmanager
async def open_fga_store(settings: Settings, storage: Storage) -> AsyncIterator[FgaStores | None]:
    kind = settings.fga_store
    if kind == "none":
        yield None
    elif kind == "memory":
        yield MemoryFgaStores()
    elif not settings.fga_store_url:
        yield SqlFgaStores(storage.db)
    else:
        config = StorageConfig(
            database_type=kind, database_url=settings.fga_store_url, timeout=storage.timeout
        )
        async with open_database(config) as db:
            await migrate(db)
            yield SqlFgaStores(db)
