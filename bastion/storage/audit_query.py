"""Reading the audit log: filtered, newest first, paged. Nothing here changes a row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bastion.storage.paging import newest_first
from bastion.storage.sql.schema import audit_logs

__all__ = ["AuditFilter", "list_audit_logs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditFilter:
    """Exact matches (None: any); timestamps are inclusive Unix seconds."""

    action: str | None = None
    actor_id: str | None = None
    resource_type: str | None = None
    resource_id: str | None = None
    from_timestamp: int | None = None
    to_timestamp: int | None = None


def _row(row: sa.Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "actor_id": row.actor_id or "",
        "actor_type": row.actor_type or "",
        "actor_email": row.actor_email or "",
        "action": row.action,
        "resource_type": row.resource_type or "",
        "resource_id": row.resource_id or "",
        "ip_address": row.ip_address or "",
        "user_agent": row.user_agent or "",
        "metadata": row._mapping["metadata"] or "{}",
        "created_at": row.created_at,
    }


def list_audit_logs(
    conn: sa.Connection, where: AuditFilter, *, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    c = audit_logs.c
    conditions = [
        column == value
        for column, value in (
            (c.action, where.action),
            (c.actor_id, where.actor_id),
            (c.resource_type, where.resource_type),
            (c.resource_id, where.resource_id),
        )
        if value is not None
    ]
    if where.from_timestamp is not None:
        conditions.append(c.created_at >= where.from_timestamp)
    if where.to_timestamp is not None:
        conditions.append(c.created_at <= where.to_timestamp)
    rows, total = newest_first(conn, audit_logs, where=conditions, offset=offset, limit=limit)
    return [_row(row) for row in rows], total
