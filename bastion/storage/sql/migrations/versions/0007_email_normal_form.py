"""Addresses in their one normal form (``core.auth.user.normalise_email``: NFKC and case
fold, IDNA UTS #46 domain, no trailing dot), so that look-alike spellings stored before
now meet the account they look like.

A row is rewritten only when its normal form differs and no other row holds it already.
Collisions (two accounts that were look-alikes of each other) are never merged: both
rows are left as they are and each is reported in the log, for the operator to decide.
Downgrade keeps the normal form (it is also a valid spelling of each address).

Revision ID: 0007
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from bastion.core.auth.user import normalise_email

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

log = logging.getLogger("bastion.migrations")


def upgrade() -> None:
    conn = op.get_bind()
    users = sa.table("service_users", sa.column("id"), sa.column("email"))
    rows = conn.execute(sa.select(users.c.id, users.c.email).where(users.c.email.is_not(None)))
    holders: dict[str, list[str]] = {}
    found = [(str(row.id), str(row.email)) for row in rows]
    for user_id, email in found:
        holders.setdefault(normalise_email(email), []).append(user_id)
    for user_id, email in found:
        wanted = normalise_email(email)
        if wanted == email:
            continue
        if len(holders[wanted]) > 1:
            others = ", ".join(i for i in holders[wanted] if i != user_id)
            log.warning(
                "address of user %s is a look-alike of user(s) %s: left as it is, not merged",
                user_id,
                others,
            )
            continue
        conn.execute(sa.update(users).where(users.c.id == user_id).values(email=wanted))


def downgrade() -> None:
    pass
