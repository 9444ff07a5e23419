"""The version 2 schema.

A database left by the previous major version may already hold some of these tables:
they are adopted (missing columns are added as nullable, missing indexes created)
rather than created. Stale unique indexes on email / phone_number are dropped after
every upgrade by ``storage.sql.identity_indexes``, not here.

The tables are written out here, frozen, instead of imported from ``schema.py``: a
migration must keep creating what it created when it was written.

Revision ID: 0001
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}


def _tables() -> list[sa.Table]:
    md = sa.MetaData()

    def table(name: str, *items: sa.schema.SchemaItem) -> sa.Table:
        return sa.Table(name, md, *items, **_MYSQL)

    def pk() -> sa.Column[str]:
        return sa.Column("id", sa.String(36), primary_key=True)

    def created() -> sa.Column[int]:
        return sa.Column("created_at", sa.BigInteger, nullable=False)

    def updated() -> sa.Column[int]:
        return sa.Column("updated_at", sa.BigInteger, nullable=False)

    def ref(name: str) -> sa.Column[str]:
        return sa.Column(name, sa.String(36), nullable=False)

    memory_key = sa.String(255).with_variant(
        mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )
    return [
        table(
            "service_users",
            pk(),
            sa.Column("email", sa.String(256)),
            sa.Column("email_verified_at", sa.BigInteger),
            sa.Column("password", sa.String(256)),
            sa.Column("signup_methods", sa.String(512), nullable=False, server_default=""),
            sa.Column("given_name", sa.String(256)),
            sa.Column("family_name", sa.String(256)),
            sa.Column("middle_name", sa.String(256)),
            sa.Column("nickname", sa.String(256)),
            sa.Column("gender", sa.String(64)),
            sa.Column("birthdate", sa.String(64)),
            sa.Column("phone_number", sa.String(64)),
            sa.Column("phone_number_verified_at", sa.BigInteger),
            sa.Column("picture", sa.Text),
            sa.Column("roles", sa.Text, nullable=False),
            sa.Column("revoked_timestamp", sa.BigInteger),
            sa.Column("is_multi_factor_auth_enabled", sa.Boolean),
            sa.Column("app_data", sa.Text),
            created(),
            updated(),
            sa.Index("ix_service_users_email", "email"),
            sa.Index("ix_service_users_phone_number", "phone_number"),
        ),
        table(
            "service_verification_requests",
            pk(),
            sa.Column("token", sa.Text, nullable=False),
            sa.Column("identifier", sa.String(64), nullable=False),
            sa.Column("expires_at", sa.BigInteger, nullable=False),
            sa.Column("email", sa.String(256), nullable=False),
            sa.Column("nonce", sa.String(256), nullable=False),
            sa.Column("redirect_uri", sa.Text),
            created(),
            updated(),
            sa.UniqueConstraint(
                "email", "identifier", name="uq_service_verification_requests_email_identifier"
            ),
            sa.Index("ix_service_verification_requests_expires_at", "expires_at"),
        ),
        table(
            "service_sessions",
            pk(),
            ref("user_id"),
            sa.Column("user_agent", sa.Text),
            sa.Column("ip", sa.String(64)),
            created(),
            updated(),
            sa.Index("ix_service_sessions_user_id", "user_id"),
        ),
        table(
            "service_otps",
            pk(),
            sa.Column("email", sa.String(256)),
            sa.Column("phone_number", sa.String(64)),
            sa.Column("otp", sa.String(256), nullable=False),
            sa.Column("expires_at", sa.BigInteger, nullable=False),
            created(),
            updated(),
            sa.Index("ix_service_otps_email", "email"),
            sa.Index("ix_service_otps_phone_number", "phone_number"),
        ),
        table(
            "service_authenticators",
            pk(),
            ref("user_id"),
            sa.Column("method", sa.String(32), nullable=False),
            sa.Column("secret", sa.Text),
            sa.Column("recovery_codes", sa.Text),
            sa.Column("verified_at", sa.BigInteger),
            created(),
            updated(),
            sa.Index("ix_service_authenticators_user_id", "user_id"),
        ),
        table(
            "service_webhooks",
            pk(),
            sa.Column("event_name", sa.String(256), nullable=False),
            sa.Column("event_description", sa.Text),
            sa.Column("end_point", sa.Text, nullable=False),
            sa.Column("headers", sa.Text),
            sa.Column("enabled", sa.Boolean, nullable=False),
            created(),
            updated(),
            sa.UniqueConstraint("event_name", name="uq_service_webhooks_event_name"),
        ),
        table(
            "service_webhook_logs",
            pk(),
            sa.Column("http_status", sa.BigInteger),
            sa.Column("response", sa.Text),
            sa.Column("request", sa.Text),
            ref("webhook_id"),
            created(),
            updated(),
            sa.Index("ix_service_webhook_logs_webhook_id", "webhook_id"),
        ),
        table(
            "service_email_templates",
            pk(),
            sa.Column("event_name", sa.String(256), nullable=False),
            sa.Column("subject", sa.Text, nullable=False),
            sa.Column("template", sa.Text, nullable=False),
            sa.Column("design", sa.Text),
            created(),
            updated(),
            sa.UniqueConstraint("event_name", name="uq_service_email_templates_event_name"),
        ),
        table(
            "service_audit_logs",
            pk(),
            sa.Column("actor_id", sa.String(256)),
            sa.Column("actor_type", sa.String(30)),
            sa.Column("actor_email", sa.String(256)),
            sa.Column("action", sa.String(100), nullable=False),
            sa.Column("resource_type", sa.String(50)),
            sa.Column("resource_id", sa.String(256)),
            sa.Column("ip_address", sa.String(45)),
            sa.Column("user_agent", sa.Text),
            sa.Column("metadata", sa.Text),
            created(),
            sa.Index("ix_service_audit_logs_action", "action"),
            sa.Index("ix_service_audit_logs_created_at", "created_at"),
        ),
        table(
            "service_memory",
            sa.Column("key", memory_key, primary_key=True),
            sa.Column(
                "value", sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")
            ),
            sa.Column("expires_at", sa.Double),
            sa.Index("ix_service_memory_expires_at", "expires_at"),
        ),
    ]


def upgrade() -> None:
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    existing = set(inspector.get_table_names())
    for table in _tables():
        if table.name not in existing:
            table.create(bind)
            continue
        have_columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in have_columns:
                op.add_column(
                    table.name,
                    sa.Column(column.name, column.type, nullable=True),
                )
        have_indexes = _index_names(bind, table.name)
        for index in table.indexes:
            if index.name not in have_indexes:
                index.create(bind)


def _index_names(bind: sa.Connection, table: str) -> set[str]:
    if bind.dialect.name == "sqlite":
        # The inspector skips SQLite expression indexes, with a warning; names are enough.
        rows = bind.execute(
            sa.text("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"),
            {"t": table},
        )
        return set(rows.scalars())
    return {str(i["name"]) for i in sa.inspect(bind).get_indexes(table)}


def downgrade() -> None:
    for table in reversed(_tables()):
        op.drop_table(table.name)
