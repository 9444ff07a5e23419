"""What deleting a user or resetting its MFA removes besides the user row."""

from __future__ import annotations

import sqlalchemy as sa

from bastion.storage.sql.schema import authenticators, otps

__all__ = ["delete_authenticators", "delete_otps"]


def delete_otps(conn: sa.Connection, *, email: str | None, phone_number: str | None) -> int:
    matches = [otps.c.email == email] if email else []
    if phone_number:
        matches.append(otps.c.phone_number == phone_number)
    if not matches:
        return 0
    return conn.execute(otps.delete().where(sa.or_(*matches))).rowcount


def delete_authenticators(conn: sa.Connection, user_id: str) -> int:
    return conn.execute(authenticators.delete().where(authenticators.c.user_id == user_id)).rowcount
