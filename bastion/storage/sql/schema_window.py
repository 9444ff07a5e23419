"""Rolling upgrades: which builds may run on a schema migrated by a newer one.

Migrations are expand-then-contract. A migration that only adds (a table, a nullable
column, an index) declares ``expand_only = True``: a build one revision older runs on the
schema it leaves unchanged. One that removes or changes what older builds use comes a
release after the expansion that replaced it, so that the release before still runs.

After every upgrade the schema records its revision and ``readable_from``: the oldest
revision whose build still runs on it (the head, moved back past every trailing
expand-only migration). A build that finds a revision it does not know reads that row:
if it knows ``readable_from`` it runs (without migrating, with a warning); if not, it
refuses, naming both revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic.script import ScriptDirectory

__all__ = ["WINDOW_TABLE", "readable_from", "record_window", "recorded_window"]

WINDOW_TABLE = sa.Table(
    "service_schema_window",
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("revision", sa.String(32), nullable=False),
    sa.Column("readable_from", sa.String(32), nullable=False),
)


def readable_from(script: ScriptDirectory) -> str | None:
    """The oldest revision whose build runs on the head's schema."""
    oldest = script.get_current_head()
    for rev in script.walk_revisions():  # head first
        expand_only = bool(getattr(rev.module, "expand_only", False))
        if rev.revision != oldest or not expand_only or rev.down_revision is None:
            break
        oldest = str(rev.down_revision)
    return oldest


def record_window(conn: sa.Connection, revision: str, oldest: str) -> None:
    conn.execute(sa.delete(WINDOW_TABLE))
    conn.execute(sa.insert(WINDOW_TABLE).values(id=1, revision=revision, readable_from=oldest))


def recorded_window(conn: sa.Connection) -> tuple[str, str] | None:
    """(revision, readable_from) as the last upgrade wrote them; None before 0012."""
    if not sa.inspect(conn).has_table(WINDOW_TABLE.name):
        return None
    row = conn.execute(sa.select(WINDOW_TABLE.c.revision, WINDOW_TABLE.c.readable_from)).first()
    return None if row is None else (row.revision, row.readable_from)
