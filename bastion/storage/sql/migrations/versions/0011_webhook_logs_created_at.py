"""Webhook delivery logs indexed by their time: the retention prune
(``--webhook-log-retention-days``, bastion/storage/retention.py) reads the oldest rows
without scanning the table.

Revision ID: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None
#: adds an index only: a build of revision 0010 runs on this schema unchanged
expand_only = True


def upgrade() -> None:
    op.create_index("ix_service_webhook_logs_created_at", "service_webhook_logs", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_service_webhook_logs_created_at", "service_webhook_logs")
