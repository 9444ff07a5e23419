"""Bring the database to the newest schema at startup, one instance at a time.

Alembic runs programmatically from the migrations shipped in this package (no
``alembic.ini`` on disk), inside ``Database.run_locked``: the PostgreSQL advisory lock,
MariaDB ``GET_LOCK`` or SQLite's single writer make a second instance starting at the
same moment wait, then find the work done. After upgrading, stale unique indexes on
email / phone_number are dropped (spec Versioning 5), under the same lock, and the
schema's compatibility window is recorded (bastion/storage/sql/schema_window.py): a
schema a newer build migrated is run on, unmigrated, when this build is in its window.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from bastion.storage.sql.database import Database
from bastion.storage.sql.identity_indexes import drop_stale_unique_indexes
from bastion.storage.sql.schema_window import readable_from, record_window, recorded_window

__all__ = [
    "MIGRATION_LOCK",
    "VERSION_TABLE",
    "MigrationReport",
    "SchemaMismatch",
    "current_revision",
    "head_revision",
    "migrate",
    "pending_revisions",
]

VERSION_TABLE = "service_alembic_version"
MIGRATION_LOCK = "bastion:migrations"
log = logging.getLogger("bastion.storage.migrate")
_SCRIPTS = Path(__file__).parent / "migrations"
#: Migrations can take longer than an ordinary lock wait.
_LOCK_TIMEOUT = 600.0


class SchemaMismatch(Exception):
    """The database's schema is not the one this build runs on (behind, or newer)."""


@dataclass(frozen=True)
class MigrationReport:
    from_revision: str | None
    to_revision: str | None
    dropped_unique_indexes: tuple[str, ...]


async def migrate(db: Database) -> MigrationReport:
    """Upgrade to the newest revision and drop stale identity unique indexes."""
    return await db.run_locked(MIGRATION_LOCK, upgrade_to_head, lock_wait=_LOCK_TIMEOUT)


def upgrade_to_head(conn: sa.Connection) -> MigrationReport:
    """The locked work of :func:`migrate`; ``conn`` is inside a transaction."""
    before = current_revision(conn)
    if _newer_within_window(conn, before):
        return MigrationReport(before, before, ())
    config = _alembic_config()
    script = ScriptDirectory.from_config(config)

    def upgrade(rev: Any, _context: Any) -> Any:
        return script._upgrade_revs("head", rev)

    with EnvironmentContext(config, script, fn=upgrade, destination_rev="head") as env:
        env.configure(connection=conn, version_table=VERSION_TABLE)
        with env.begin_transaction():
            env.run_migrations()
    dropped = drop_stale_unique_indexes(conn)
    after = current_revision(conn)
    oldest = readable_from(script)
    if after is not None and oldest is not None:
        record_window(conn, after, oldest)
    return MigrationReport(before, after, tuple(dropped))


def current_revision(conn: sa.Connection) -> str | None:
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def pending_revisions(conn: sa.Connection) -> list[str]:
    """The revisions an upgrade would apply, oldest first (raises SchemaMismatch for a
    database migrated by a newer build)."""
    current = current_revision(conn)
    if _newer_within_window(conn, current):
        return []
    script = ScriptDirectory.from_config(_alembic_config())
    found = [rev.revision for rev in script.iterate_revisions("head", current)]
    return list(reversed(found))


def _newer_within_window(conn: sa.Connection, revision: str | None) -> bool:
    """False for a revision this build knows. True (with a warning) for a newer one whose
    recorded window includes this build; SchemaMismatch for a newer one that does not."""
    if revision is None:
        return False
    script = ScriptDirectory.from_config(_alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    if revision in known:
        return False
    window = recorded_window(conn)
    if window is not None and window[0] != revision:
        window = None  # written by an older upgrade: says nothing of this schema
    if window is not None and window[1] in known:
        log.warning(
            f"this database was migrated by a newer bastion (revision {revision}); this "
            f"build (up to {head_revision()}) is within its compatibility window (builds "
            f"from revision {window[1]} run on it): running without migrating"
        )
        return True
    reach = f" (builds from revision {window[1]} run on it)" if window else ""
    raise SchemaMismatch(
        f"this database was migrated by a newer bastion (revision {revision}){reach}; "
        f"this build knows up to {head_revision()}"
    )


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_alembic_config()).get_current_head()


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.set_main_option("path_separator", "os")
    return config
