"""Passkeys (WebAuthn credentials, issue 22): one row per credential, its id unique.

Revision ID: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_passkeys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(36), nullable=False),
        sa.Column("credential_id", sa.String(255), nullable=False),
        sa.Column("public_key", sa.LargeBinary, nullable=False),
        sa.Column("sign_count", sa.BigInteger, nullable=False),
        sa.Column("transports", sa.String(255), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),  # core.limits: "name"
        sa.Column("backup_eligible", sa.Boolean, nullable=False),
        sa.Column("backed_up", sa.Boolean, nullable=False),
        sa.Column("last_used_at", sa.BigInteger),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("credential_id", name="uq_service_passkeys_credential_id"),
        mysql_engine="InnoDB",
        mysql_charset="utf8mb4",
    )
    op.create_index("ix_service_passkeys_user_id", "service_passkeys", ["user_id"])


def downgrade() -> None:
    op.drop_table("service_passkeys")
