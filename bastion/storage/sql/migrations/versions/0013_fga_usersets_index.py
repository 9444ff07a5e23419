"""The engine reads the store on demand (issue 37): an index of the tuples whose user is a
userset (``type:id#relation``), by store, object and relation, so that reading an
object's usersets does not walk its direct users (a group of a million members).
Partial (those rows alone) on PostgreSQL and SQLite; MySQL/MariaDB have no partial
indexes and index every row.

Revision ID: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None
#: adds an index only: a build of revision 0012 runs on this schema unchanged
expand_only = True

#: Word for word the predicate the engine's reads carry (storage/fga_reads.py).
USERSETS = sa.text("\"user\" LIKE '%#%'")


def upgrade() -> None:
    op.create_index(
        "ix_service_fga_tuples_usersets",
        "service_fga_tuples",
        ["store_id", "object", "relation"],
        postgresql_where=USERSETS,
        sqlite_where=USERSETS,
    )


def downgrade() -> None:
    op.drop_index("ix_service_fga_tuples_usersets", table_name="service_fga_tuples")
