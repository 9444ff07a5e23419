"""``bastion migrate [--dry-run] FLAGS...``: apply the pending schema migrations and exit.

For operators who run the server with ``--migrate=off`` (its database user needs no right
to change the schema) and migrate as a separate step, with the same database flags.
``--dry-run`` lists the pending revisions without applying them.
"""

from __future__ import annotations

import sys
from functools import partial

import trio

from bastion.core.settings import Settings
from bastion.storage import SchemaMismatch, StorageUnavailable
from bastion.storage.sql import open_database
from bastion.storage.sql.migrate import head_revision, migrate, pending_revisions
from bastion.storage_config import storage_config


async def _run(settings: Settings, dry_run: bool) -> str:
    async with open_database(storage_config(settings)) as db:
        pending = await db.run(pending_revisions)
        if not pending:
            return f"the schema is current (revision {head_revision()}): nothing to apply"
        if dry_run:
            return "pending migrations (oldest first): " + ", ".join(pending)
        report = await migrate(db)
        return (
            f"migrated from revision {report.from_revision or 'none'} "
            f"to {report.to_revision}: applied {', '.join(pending)}"
        )


def run_migrate(settings: Settings, *, dry_run: bool) -> int:
    try:
        print(trio.run(partial(_run, settings, dry_run)))
    except (StorageUnavailable, SchemaMismatch) as exc:
        print(f"bastion migrate: {exc}", file=sys.stderr)
        return 1
    return 0
