"""Several authorization stores (OpenFGA's ``/stores``), each isolated: a stores table, a
store id on models, tuples and the changelog (revisions now count per store), and
OpenFGA's assertions. Existing rows go to the default store, which the Authorizer-shaped
API keeps using; it is created here.

Revision ID: 0008
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
DEFAULT_STORE = "00000000000000000000000000"


def _text(length: int) -> sa.String:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def _store_id(*, primary_key: bool = False) -> sa.Column[str]:
    return sa.Column(
        "store_id",
        sa.String(26),
        nullable=False,
        server_default=DEFAULT_STORE,
        primary_key=primary_key,
    )


def upgrade() -> None:
    stores = op.create_table(
        "service_fga_stores",
        sa.Column("id", sa.String(26), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        **_MYSQL,
    )
    now = int(time.time())
    op.bulk_insert(
        stores, [{"id": DEFAULT_STORE, "name": "default", "created_at": now, "updated_at": now}]
    )
    op.create_table(
        "service_fga_assertions",
        sa.Column("store_id", sa.String(26), primary_key=True),
        sa.Column("model_id", sa.String(36), primary_key=True),
        sa.Column("assertions", sa.Text, nullable=False),
        **_MYSQL,
    )
    with op.batch_alter_table("service_fga_models") as batch:
        batch.add_column(_store_id())
    with op.batch_alter_table("service_fga_tuples") as batch:
        batch.add_column(_store_id())
        batch.drop_constraint("uq_service_fga_tuples_key_hash", type_="unique")
        batch.create_unique_constraint("uq_service_fga_tuples_store_key", ["store_id", "key_hash"])
    _rebuild_changelog(per_store=True)


def _rebuild_changelog(*, per_store: bool) -> None:
    """Revisions count per store: the primary key becomes (store_id, revision) (or back to
    revision alone). A new table, the rows copied: the one way that is the same on every
    database."""
    columns = [
        sa.Column("revision", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("object", _text(512), nullable=False, server_default=""),
        sa.Column("relation", _text(50), nullable=False, server_default=""),
        sa.Column("user", _text(512), nullable=False, server_default=""),
        sa.Column("condition_name", sa.String(256)),
        sa.Column("condition_context", sa.Text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
    ]
    names = [c.name for c in columns]
    # PostgreSQL names a key's index in the schema: the two tables' keys need two names.
    key = sa.PrimaryKeyConstraint(
        *(["store_id", "revision"] if per_store else ["revision"]),
        name="pk_service_fga_changelog" if per_store else "pk_service_fga_changelog_0007",
    )
    new = op.create_table(
        "service_fga_changelog_new",
        *([_store_id()] if per_store else []),
        *columns,
        key,
        **_MYSQL,
    )
    old = sa.table("service_fga_changelog", *(sa.column(n) for n in names))
    op.execute(sa.insert(new).from_select(names, sa.select(*(old.c[n] for n in names))))
    op.drop_table("service_fga_changelog")
    op.rename_table("service_fga_changelog_new", "service_fga_changelog")


def downgrade() -> None:
    """Back to one store: the default one; every other store is dropped with its rows."""
    for table in ("service_fga_tuples", "service_fga_models", "service_fga_changelog"):
        rows = sa.table(table, sa.column("store_id"))
        op.execute(sa.delete(rows).where(rows.c.store_id != DEFAULT_STORE))
    _rebuild_changelog(per_store=False)
    with op.batch_alter_table("service_fga_tuples") as batch:
        batch.drop_constraint("uq_service_fga_tuples_store_key", type_="unique")
        batch.create_unique_constraint("uq_service_fga_tuples_key_hash", ["key_hash"])
        batch.drop_column("store_id")
    with op.batch_alter_table("service_fga_models") as batch:
        batch.drop_column("store_id")
    op.drop_table("service_fga_assertions")
    op.drop_table("service_fga_stores")
