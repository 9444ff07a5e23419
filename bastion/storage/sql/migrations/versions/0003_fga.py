"""The embedded authorization engine's store: model versions, tuples and the changelog.

Written out here, frozen, rather than imported from ``schema.py``.

Revision ID: 0003
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _text(length: int) -> sa.String:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def upgrade() -> None:
    op.create_table(
        "service_fga_models",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("dsl", sa.Text, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Index("ix_service_fga_models_revision", "revision"),
        **_MYSQL,
    )
    op.create_table(
        "service_fga_tuples",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("object_type", _text(254), nullable=False),
        sa.Column("object", _text(512), nullable=False),
        sa.Column("relation", _text(50), nullable=False),
        sa.Column("user", _text(512), nullable=False),
        sa.Column("condition_name", sa.String(256)),
        sa.Column("condition_context", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("key_hash", name="uq_service_fga_tuples_key_hash"),
        sa.Index("ix_service_fga_tuples_object_relation", "object", "relation"),
        sa.Index("ix_service_fga_tuples_user_object_type", "user", "object_type"),
        **_MYSQL,
    )
    op.create_table(
        "service_fga_changelog",
        sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("object", _text(512), nullable=False, server_default=""),
        sa.Column("relation", _text(50), nullable=False, server_default=""),
        sa.Column("user", _text(512), nullable=False, server_default=""),
        sa.Column("condition_name", sa.String(256)),
        sa.Column("condition_context", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        **_MYSQL,
    )


def downgrade() -> None:
    op.drop_table("service_fga_changelog")
    op.drop_table("service_fga_tuples")
    op.drop_table("service_fga_models")
