"""The schema's compatibility window (rolling upgrades): one row saying the oldest
revision whose build still runs on this schema (bastion/storage/sql/schema_window.py).
Written by every upgrade; read by a build that finds a schema newer than it knows.

Revision ID: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None
#: adds a table only: a build of revision 0011 runs on this schema unchanged
expand_only = True


def upgrade() -> None:
    op.create_table(
        "service_schema_window",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("revision", sa.String(32), nullable=False),
        sa.Column("readable_from", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("service_schema_window")
