"""Webhooks and their delivery logs (``service_webhooks``, ``service_webhook_logs``).

Sync functions on a connection, run inside ``Database.run``. Rows come back as the
API's Webhook / WebhookLog objects (``end_point`` is ``endpoint``, ``headers`` a map).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from bastion.storage.paging import newest_first
from bastion.storage.sql.schema import webhook_logs, webhooks

__all__ = [
    "delete_webhook",
    "enabled_event_names",
    "enabled_for_event",
    "get_webhook",
    "insert_log",
    "insert_webhook",
    "list_logs",
    "list_webhooks",
    "update_webhook",
]


def _webhook(row: sa.Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "event_name": row.event_name,
        "event_description": row.event_description or "",
        "endpoint": row.end_point,
        "enabled": bool(row.enabled),
        "headers": json.loads(row.headers) if row.headers else {},
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _log(row: sa.Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "http_status": row.http_status or 0,
        "response": row.response or "",
        "request": row.request or "",
        "webhook_id": row.webhook_id,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def insert_webhook(
    conn: sa.Connection,
    *,
    event_name: str,
    event_description: str,
    endpoint: str,
    enabled: bool,
    headers: Mapping[str, str],
    now: int,
) -> str:
    webhook_id = str(uuid.uuid4())
    conn.execute(
        webhooks.insert().values(
            id=webhook_id,
            event_name=event_name,
            event_description=event_description,
            end_point=endpoint,
            enabled=enabled,
            headers=json.dumps(dict(headers), separators=(",", ":")),
            created_at=now,
            updated_at=now,
        )
    )
    return webhook_id


def update_webhook(
    conn: sa.Connection, webhook_id: str, changes: Mapping[str, Any], *, now: int
) -> bool:
    """Apply API-named ``changes``; False when there is no such webhook."""
    values: dict[str, Any] = {"updated_at": now}
    for name, value in changes.items():
        if name == "endpoint":
            values["end_point"] = value
        elif name == "headers":
            values["headers"] = json.dumps(dict(value), separators=(",", ":"))
        else:
            values[name] = value
    result = conn.execute(webhooks.update().where(webhooks.c.id == webhook_id).values(**values))
    return result.rowcount == 1


def delete_webhook(conn: sa.Connection, webhook_id: str) -> bool:
    """Delete the webhook and its logs; False when there is no such webhook."""
    conn.execute(webhook_logs.delete().where(webhook_logs.c.webhook_id == webhook_id))
    return conn.execute(webhooks.delete().where(webhooks.c.id == webhook_id)).rowcount == 1


def get_webhook(conn: sa.Connection, webhook_id: str) -> dict[str, Any] | None:
    row = conn.execute(sa.select(webhooks).where(webhooks.c.id == webhook_id)).first()
    return None if row is None else _webhook(row)


def list_webhooks(
    conn: sa.Connection, *, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    rows, total = newest_first(conn, webhooks, offset=offset, limit=limit)
    return [_webhook(row) for row in rows], total


def enabled_event_names(conn: sa.Connection) -> frozenset[str]:
    """The events at least one enabled webhook listens for."""
    rows = conn.execute(
        sa.select(webhooks.c.event_name).where(webhooks.c.enabled.is_(True)).distinct()
    ).scalars()
    return frozenset(rows)


def enabled_for_event(conn: sa.Connection, event_name: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(webhooks)
        .where(webhooks.c.event_name == event_name, webhooks.c.enabled.is_(True))
        .order_by(webhooks.c.created_at, webhooks.c.id)
    ).all()
    return [_webhook(row) for row in rows]


def insert_log(
    conn: sa.Connection,
    *,
    webhook_id: str,
    http_status: int,
    request: str,
    response: str,
    now: int,
) -> str:
    log_id = str(uuid.uuid4())
    conn.execute(
        webhook_logs.insert().values(
            id=log_id,
            webhook_id=webhook_id,
            http_status=http_status,
            request=request,
            response=response,
            created_at=now,
            updated_at=now,
        )
    )
    return log_id


def list_logs(
    conn: sa.Connection, *, webhook_id: str | None, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    where = [] if webhook_id is None else [webhook_logs.c.webhook_id == webhook_id]
    rows, total = newest_first(conn, webhook_logs, where=where, offset=offset, limit=limit)
    return [_log(row) for row in rows], total
