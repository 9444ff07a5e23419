"""bastion's storage: the SQL database and the memory store, opened together. Imports
``core`` only (never ``service`` or a transport)::

async with open_storage(config) as storage:
    user = await storage.db.run(lambda conn: ..., write=True)
    await storage.memory.set("key", b"value", ttl=60)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

from bastion.storage.config import SUPPORTED_DATABASE_TYPES, StorageConfig
from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory import MemoryStore, RedisMemoryStore, SqlMemoryStore, memory_store_for
from bastion.storage.sql.database import Database, open_database, reserved_connections
from bastion.storage.sql.migrate import SchemaMismatch, migrate, pending_revisions
from bastion.storage.webhook_listeners import WebhookListeners

__all__ = [
    "SUPPORTED_DATABASE_TYPES",
    "SchemaMismatch",
    "Storage",
    "StorageConfig",
    "StorageUnavailable",
    "open_storage",
    "reserved_connections",
]


@dataclass(frozen=True)
class Storage:
    db: Database
    memory: MemoryStore
    timeout: float
    #: which events some enabled webhook listens for (cached; see its module)
    webhook_listeners: WebhookListeners

    def statistics(self) -> dict[str, dict[str, int]]:
        """Per store (``database``, ``memory`` when it is Redis): counters since start."""
        found = {"database": self.db.statistics()}
        if isinstance(self.memory, RedisMemoryStore):
            found["memory"] = self.memory.statistics()
        return found

    async def ping(self) -> None:
        """Raise :class:`StorageUnavailable` naming the store (``database`` or ``memory
        store``) unless both answer within ``timeout``."""
        await _answers(self.db.ping, "database", self.timeout)
        # The default memory store lives in the same database: one ping proves both.
        if not isinstance(self.memory, SqlMemoryStore):
            await _answers(self.memory.ping, "memory store", self.timeout)


async def _answers(ping: Callable[[], Awaitable[None]], store: str, seconds: float) -> None:
    try:
        with trio.fail_after(seconds):
            await ping()
    except trio.TooSlowError:
        raise StorageUnavailable(f"the {store} did not answer in time", store=store) from None
    except StorageUnavailable as exc:
        raise StorageUnavailable(str(exc), store=store) from exc
    except OSError as exc:
        raise StorageUnavailable(f"the {store} is unreachable: {exc}", store=store) from exc


@asynccontextmanager
async def open_storage(
    config: StorageConfig, *, opened: Callable[[Storage], None] | None = None
) -> AsyncIterator[Storage]:
    """Connect, migrate (unless ``config.run_migrations`` is off), and close on exit.
    ``opened`` sees the storage before anyone uses it (the tracer instruments it)."""
    memory_url = config.memory_store_url
    async with open_database(config) as db:
        if config.run_migrations:
            await migrate(db)
        elif config.check_schema:
            pending = await db.run(pending_revisions)
            if pending:
                raise SchemaMismatch(
                    f"the database schema is behind this build ({len(pending)} pending "
                    f"migration(s): {', '.join(pending)}): run `bastion migrate` with the "
                    "same database flags, or start with --migrate=auto"
                )
        memory = memory_store_for(
            memory_url, db, pool_size=config.pool_size, timeout=config.timeout
        )
        try:
            storage = Storage(
                db=db,
                memory=memory,
                timeout=config.timeout,
                webhook_listeners=WebhookListeners(db),
            )
            if opened is not None:
                opened(storage)
            yield storage
        finally:
            with trio.CancelScope(shield=True):
                await memory.aclose()
