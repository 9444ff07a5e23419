"""Small helpers shared by the storage tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from bastion.storage import StorageConfig

#: Upper bound on waiting for something outside the test (an expiry, another server
#: process) to happen. Tests never assert how long it took.
PATIENCE = 10.0
_POLL = 0.05


def asyncpg_url(postgres_url: str) -> str:
    """The same PostgreSQL database, reached through asyncpg."""
    return "postgresql+asyncpg://" + postgres_url.split("://", 1)[1]


def config_for(kind: str, url: str, **options: object) -> StorageConfig:
    return StorageConfig(database_type=kind, database_url=url, **options)  # type: ignore[arg-type]


async def eventually(check: Callable[[], Awaitable[bool]]) -> bool:
    """Poll ``check`` until it holds, at most PATIENCE seconds; return its last answer."""
    for _ in range(int(PATIENCE / _POLL)):
        if await check():
            return True
        await trio.sleep(_POLL)
    return await check()
