"""Verification requests (the rows behind emailed links): sync functions over a Connection.

One pending request per (email, identifier): storing a new one replaces the old, so only
the newest link works. A request is single-use: :func:`consume` deletes it and tells
whether it was still there, so of two concurrent uses of one link only one succeeds.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bastion.core.auth.verification import VerificationRequest
from bastion.storage.paging import newest_first
from bastion.storage.sql.schema import verification_requests as table

__all__ = [
    "consume",
    "delete_for_email",
    "get_by_email",
    "get_by_token",
    "list_page",
    "replace",
]


def _from_row(row: Any) -> VerificationRequest:
    return VerificationRequest(
        id=row.id,
        identifier=row.identifier,
        email=row.email,
        nonce=row.nonce,
        redirect_uri=row.redirect_uri or "",
        expires_at=row.expires_at,
    )


def replace(conn: sa.Connection, request: VerificationRequest, *, token: str, now: int) -> None:
    conn.execute(
        table.delete().where(
            table.c.email == request.email, table.c.identifier == request.identifier
        )
    )
    conn.execute(
        table.insert().values(
            id=request.id,
            token=token,
            identifier=request.identifier,
            expires_at=request.expires_at,
            email=request.email,
            nonce=request.nonce,
            redirect_uri=request.redirect_uri,
            created_at=now,
            updated_at=now,
        )
    )


def get_by_token(conn: sa.Connection, token: str) -> VerificationRequest | None:
    row = conn.execute(sa.select(table).where(table.c.token == token).limit(1)).first()
    return None if row is None else _from_row(row)


def get_by_email(conn: sa.Connection, email: str, identifier: str) -> VerificationRequest | None:
    row = conn.execute(
        sa.select(table).where(table.c.email == email, table.c.identifier == identifier).limit(1)
    ).first()
    return None if row is None else _from_row(row)


def consume(conn: sa.Connection, request_id: str) -> bool:
    """Delete the request; False when it was already gone (used or replaced)."""
    return conn.execute(table.delete().where(table.c.id == request_id)).rowcount > 0


def delete_for_email(conn: sa.Connection, email: str) -> int:
    return conn.execute(table.delete().where(table.c.email == email)).rowcount


def list_page(conn: sa.Connection, *, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Rows as the admin API shows them (token included), newest first, and the total."""
    rows, total = newest_first(conn, table, offset=offset, limit=limit)
    return [
        {
            "id": r.id,
            "identifier": r.identifier,
            "token": r.token,
            "email": r.email,
            "expires": r.expires_at,
            "created_at": r.created_at,
            "updated_at": r.updated_at,
            "nonce": r.nonce,
            "redirect_uri": r.redirect_uri,
        }
        for r in rows
    ], total
