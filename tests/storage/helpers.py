"""Small helpers shared by the storage tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import sqlalchemy as sa
import trio
from alembic.runtime.environment import EnvironmentContext
from alembic.script import ScriptDirectory

from bastion.storage import StorageConfig
from bastion.storage.sql.migrate import VERSION_TABLE, _alembic_config

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


def upgrade_to(conn: sa.Connection, target: str, *, down: bool = False) -> None:
    """The schema as of revision ``target``: what a database written by an older release has
    (``down``: reached by downgrading)."""
    config = _alembic_config()
    script = ScriptDirectory.from_config(config)
    step = script._downgrade_revs if down else script._upgrade_revs
    with EnvironmentContext(
        config,
        script,
        fn=lambda rev, _context: step(target, rev),
        destination_rev=target,
    ) as env:
        env.configure(connection=conn, version_table=VERSION_TABLE)
        with env.begin_transaction():
            env.run_migrations()
