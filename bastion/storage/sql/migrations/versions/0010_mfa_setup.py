"""MFA enrolment as Authorizer's newer API has it: the factors a user set up, when they
skipped the offer, when they locked their MFA (bastion/core/state_machines/mfa_setup.py).

Revision ID: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "service_users",
        sa.Column("enrolled_mfa_methods", sa.String(64), nullable=False, server_default=""),
    )
    op.add_column("service_users", sa.Column("has_skipped_mfa_setup_at", sa.BigInteger))
    op.add_column("service_users", sa.Column("mfa_locked_at", sa.BigInteger))


def downgrade() -> None:
    op.drop_column("service_users", "mfa_locked_at")
    op.drop_column("service_users", "has_skipped_mfa_setup_at")
    op.drop_column("service_users", "enrolled_mfa_methods")
