"""Audit rows: written in the transaction of the action they record, never updated or deleted.

Every surface records the same facts: who (actor id, type, email), what (action,
resource), from where (client IP, user agent) and through which protocol (in
``metadata``), and when.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from bastion.storage.sql.schema import audit_logs

__all__ = ["AuditEntry", "record"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    action: str
    actor_id: str = ""
    actor_type: str = "user"
    actor_email: str | None = None
    resource_type: str = ""
    resource_id: str = ""
    ip_address: str = ""
    user_agent: str = ""
    protocol: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


def record(conn: sa.Connection, entry: AuditEntry, *, now: float) -> str:
    row_id = str(uuid.uuid4())
    meta = {**entry.metadata}
    if entry.protocol:
        meta["protocol"] = entry.protocol
    conn.execute(
        audit_logs.insert().values(
            id=row_id,
            actor_id=entry.actor_id[:256],
            actor_type=entry.actor_type[:30],
            actor_email=(entry.actor_email or "")[:256] or None,
            action=entry.action[:100],
            resource_type=entry.resource_type[:50],
            resource_id=entry.resource_id[:256],
            ip_address=entry.ip_address[:45],
            user_agent=entry.user_agent[:1024],
            metadata=json.dumps(meta, separators=(",", ":"), default=str),
            created_at=int(now),
        )
    )
    return row_id
