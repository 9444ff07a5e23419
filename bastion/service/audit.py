"""Audit rows for actions taken by the super-admin, with the caller's address and protocol."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from bastion.service.context import CallerContext
from bastion.storage.audit import AuditEntry, record

#: The actor id of every admin action: there is one admin, known by the shared secret.
ADMIN_ACTOR_ID = "admin"


def record_admin_action(
    conn: sa.Connection,
    caller: CallerContext,
    action: str,
    *,
    resource_type: str,
    resource_id: str,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Record ``action`` in the transaction that performs it."""
    record(
        conn,
        AuditEntry(
            action=action,
            actor_id=ADMIN_ACTOR_ID,
            actor_type="admin",
            resource_type=resource_type,
            resource_id=resource_id,
            ip_address=caller.client_ip,
            user_agent=caller.user_agent,
            protocol=caller.protocol.value,
            metadata=metadata or {},
        ),
        now=time.time(),
    )
