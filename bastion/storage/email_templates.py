"""Admin email templates (``service_email_templates``): at most one per event."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from bastion.storage.paging import newest_first
from bastion.storage.sql.schema import email_templates

__all__ = [
    "delete_template",
    "event_taken",
    "get_template",
    "insert_template",
    "list_templates",
    "template_for_event",
    "update_template",
]


def _template(row: sa.Row[Any]) -> dict[str, Any]:
    return {
        "id": row.id,
        "event_name": row.event_name,
        "subject": row.subject,
        "template": row.template,
        "design": row.design or "",
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def event_taken(conn: sa.Connection, event_name: str, *, other_than: str | None = None) -> bool:
    query = sa.select(email_templates.c.id).where(email_templates.c.event_name == event_name)
    if other_than is not None:
        query = query.where(email_templates.c.id != other_than)
    return conn.execute(query.limit(1)).first() is not None


def insert_template(
    conn: sa.Connection, *, event_name: str, subject: str, template: str, design: str, now: int
) -> str:
    template_id = str(uuid.uuid4())
    conn.execute(
        email_templates.insert().values(
            id=template_id,
            event_name=event_name,
            subject=subject,
            template=template,
            design=design,
            created_at=now,
            updated_at=now,
        )
    )
    return template_id


def update_template(
    conn: sa.Connection, template_id: str, changes: Mapping[str, Any], *, now: int
) -> bool:
    result = conn.execute(
        email_templates.update()
        .where(email_templates.c.id == template_id)
        .values(**changes, updated_at=now)
    )
    return result.rowcount == 1


def delete_template(conn: sa.Connection, template_id: str) -> bool:
    result = conn.execute(email_templates.delete().where(email_templates.c.id == template_id))
    return result.rowcount == 1


def get_template(conn: sa.Connection, template_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.select(email_templates).where(email_templates.c.id == template_id)
    ).first()
    return None if row is None else _template(row)


def template_for_event(conn: sa.Connection, event_name: str) -> dict[str, Any] | None:
    row = conn.execute(
        sa.select(email_templates).where(email_templates.c.event_name == event_name)
    ).first()
    return None if row is None else _template(row)


def list_templates(
    conn: sa.Connection, *, offset: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    rows, total = newest_first(conn, email_templates, offset=offset, limit=limit)
    return [_template(row) for row in rows], total
