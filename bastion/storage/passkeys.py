"""Passkey rows (``service_passkeys``): insert with a unique credential id, list, the
counter's compare-and-set, rename, delete."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from bastion.core.auth.passkeys import PasskeyCredential
from bastion.storage.sql.schema import passkeys as table

__all__ = [
    "by_credential_id",
    "delete",
    "delete_for_user",
    "for_user",
    "has_any",
    "insert",
    "record_use",
    "rename",
]


def _credential(row: Mapping[str, Any]) -> PasskeyCredential:
    return PasskeyCredential(
        id=row["id"],
        user_id=row["user_id"],
        credential_id=row["credential_id"],
        public_key=bytes(row["public_key"]),
        sign_count=int(row["sign_count"]),
        transports=tuple(t for t in row["transports"].split(",") if t),
        name=row["name"],
        backup_eligible=bool(row["backup_eligible"]),
        backed_up=bool(row["backed_up"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        last_used_at=None if row["last_used_at"] is None else int(row["last_used_at"]),
    )


def insert(conn: sa.Connection, credential: PasskeyCredential) -> bool:
    """Store ``credential``; False when its credential id is registered already. A
    savepoint keeps the caller's transaction usable after the unique index refuses."""
    values = {
        "id": credential.id,
        "user_id": credential.user_id,
        "credential_id": credential.credential_id,
        "public_key": credential.public_key,
        "sign_count": credential.sign_count,
        "transports": ",".join(credential.transports),
        "name": credential.name,
        "backup_eligible": credential.backup_eligible,
        "backed_up": credential.backed_up,
        "last_used_at": credential.last_used_at,
        "created_at": credential.created_at,
        "updated_at": credential.updated_at,
    }
    try:
        with conn.begin_nested():
            conn.execute(sa.insert(table).values(**values))
    except sa.exc.IntegrityError:
        return False
    return True


def for_user(conn: sa.Connection, user_id: str) -> tuple[PasskeyCredential, ...]:
    query = sa.select(table).where(table.c.user_id == user_id).order_by(table.c.created_at)
    return tuple(_credential(row) for row in conn.execute(query).mappings())


def has_any(conn: sa.Connection, user_id: str) -> bool:
    """Does the user have a passkey (the login's second-factor decision asks)?"""
    query = sa.select(table.c.id).where(table.c.user_id == user_id).limit(1)
    return conn.execute(query).first() is not None


def by_credential_id(conn: sa.Connection, credential_id: str) -> PasskeyCredential | None:
    query = sa.select(table).where(table.c.credential_id == credential_id)
    row = conn.execute(query).mappings().first()
    return None if row is None else _credential(row)


def record_use(
    conn: sa.Connection, row_id: str, *, previous: int, sign_count: int, backed_up: bool, now: int
) -> bool:
    """Move the counter on only if it is still ``previous`` (one of two racing sign-ins)."""
    update = (
        sa.update(table)
        .where(table.c.id == row_id, table.c.sign_count == previous)
        .values(sign_count=sign_count, backed_up=backed_up, last_used_at=now, updated_at=now)
    )
    return conn.execute(update).rowcount == 1


def rename(conn: sa.Connection, user_id: str, row_id: str, name: str, *, now: int) -> bool:
    update = (
        sa.update(table)
        .where(table.c.id == row_id, table.c.user_id == user_id)
        .values(name=name, updated_at=now)
    )
    return conn.execute(update).rowcount == 1


def delete(conn: sa.Connection, user_id: str, row_id: str) -> PasskeyCredential | None:
    """Remove one of ``user_id``'s passkeys; the row removed, None if there was none."""
    query = sa.select(table).where(table.c.id == row_id, table.c.user_id == user_id)
    row = conn.execute(query).mappings().first()
    if row is None:
        return None
    conn.execute(sa.delete(table).where(table.c.id == row_id))
    return _credential(row)


def delete_for_user(conn: sa.Connection, user_id: str, *, since: int | None = None) -> None:
    """Remove the user's passkeys (with ``since``: those registered at or after it)."""
    where = table.c.user_id == user_id
    if since is not None:
        where = sa.and_(where, table.c.created_at >= since)
    conn.execute(sa.delete(table).where(where))
