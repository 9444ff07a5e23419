"""Several webhooks per event: ``service_webhooks.event_name`` loses its unique constraint.

Authorizer made names unique and then suffixed each with ``-<unix time>`` to get around it;
bastion stores and returns the event name as registered, so the constraint has to go.
A plain index stays for the lookup at delivery time.

Revision ID: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("service_webhooks") as batch:
        batch.drop_constraint("uq_service_webhooks_event_name", type_="unique")
        batch.create_index("ix_service_webhooks_event_name", ["event_name"])


def downgrade() -> None:
    with op.batch_alter_table("service_webhooks") as batch:
        batch.drop_index("ix_service_webhooks_event_name")
        batch.create_unique_constraint("uq_service_webhooks_event_name", ["event_name"])
