"""``bastion migrate [--dry-run] DATABASE-FLAGS...``: apply the pending schema migrations and
exit.

For operators who run the server with ``--migrate=off`` (its database user needs no right
to change the schema) and migrate as a separate step, with the same database flags and no
other secret (:mod:`bastion.database_command`). ``--dry-run`` lists the pending revisions
without applying them.
"""

from __future__ import annotations

import sys
from functools import partial

import trio

from bastion.database_command import CommandFlag, DatabaseCommand, Invocation
from bastion.storage import SchemaMismatch, StorageConfig, StorageUnavailable
from bastion.storage.sql import open_database
from bastion.storage.sql.migrate import head_revision, migrate, pending_revisions

MIGRATE = DatabaseCommand(
    words=("migrate",),
    summary=(
        "Applies the pending schema migrations under the cross-instance migration lock, then "
        "exits: for servers run with --migrate=off."
    ),
    flags=(CommandFlag("dry-run", "List the pending migrations; apply nothing."),),
)


async def _run(storage: StorageConfig, dry_run: bool) -> str:
    async with open_database(storage) as db:
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


def run_migrate(invocation: Invocation) -> int:
    try:
        print(trio.run(partial(_run, invocation.storage, "dry-run" in invocation.options)))
    except (StorageUnavailable, SchemaMismatch) as exc:
        print(f"bastion migrate: {exc}", file=sys.stderr)
        return 1
    return 0
