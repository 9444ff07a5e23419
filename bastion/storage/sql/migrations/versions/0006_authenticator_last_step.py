"""The last accepted TOTP time step of an authenticator: a code is refused for the rest of
its window once used (compare-and-set in ``storage.authenticators.record_step``).

Revision ID: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "service_authenticators", sa.Column("last_used_step", sa.BigInteger, nullable=True)
    )


def downgrade() -> None:
    op.drop_column("service_authenticators", "last_used_step")
