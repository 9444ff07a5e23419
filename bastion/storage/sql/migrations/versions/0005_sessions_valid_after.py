"""The SQL-side session marker: tokens issued before ``sessions_valid_after`` are refused.

A password reset, deactivation or admin revoke commits this first and then drops the
user's sessions from the memory store; validation checks both, so a failed memory-store
delete can never leave a live token (architecture.md, "State that spans stores").

Revision ID: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"  # 0004 is the webhooks migration (renumbered by the lead)
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("service_users", sa.Column("sessions_valid_after", sa.BigInteger, nullable=True))


def downgrade() -> None:
    op.drop_column("service_users", "sessions_valid_after")
