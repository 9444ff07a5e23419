"""Pruning what has outlived its use: rows past their expiry (verification requests,
SQL memory-store entries) and logs past their retention (audit, webhook
deliveries).

Each call deletes at most ``limit`` rows in one short transaction: the ids are read
first, then deleted by id (MySQL allows no ``LIMIT`` in a ``DELETE ... IN (SELECT)``), so
no statement holds locks on more than one batch and the hot paths never wait long on it.
Every table pruned here is indexed on the column the prune reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from bastion.storage.sql.schema import (
    audit_logs,
    memory,
    verification_requests,
    webhook_logs,
)

__all__ = ["EXPIRING", "LOGS", "Prunable", "prune_batch"]


@dataclass(frozen=True, slots=True)
class Prunable:
    """A table and the column whose value, once below a cut-off, means the row is dead."""

    name: str
    table: sa.Table
    column: str
    key: str = "id"


#: Rows whose own expiry time has passed (always pruned).
EXPIRING = (
    Prunable("verification_requests", verification_requests, "expires_at"),
    Prunable("memory", memory, "expires_at", key="key"),
)
#: Logs, pruned past their retention (``--*-retention-days``).
LOGS = {
    "audit_logs": Prunable("audit_logs", audit_logs, "created_at"),
    "webhook_logs": Prunable("webhook_logs", webhook_logs, "created_at"),
}


def prune_batch(conn: sa.Connection, target: Prunable, before: float, limit: int) -> int:
    """Delete at most ``limit`` rows of ``target`` whose column is below ``before``; how
    many were deleted."""
    key, column = target.table.c[target.key], target.table.c[target.column]
    keys = conn.execute(sa.select(key).where(column < before).limit(limit)).scalars().all()
    if not keys:
        return 0
    deleted = conn.execute(sa.delete(target.table).where(key.in_(keys))).rowcount
    return len(keys) if deleted is None or deleted < 0 else deleted
