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


def delete_authenticators(conn: sa.Connection, user_id: str, *, since: int | None = None) -> int:
    """Remove the user's authenticator (with ``since``: only one enrolled at or after it)."""
    where = authenticators.c.user_id == user_id
    if since is not None:
        where = sa.and_(where, authenticators.c.created_at >= since)
    return conn.execute(authenticators.delete().where(where)).rowcount
