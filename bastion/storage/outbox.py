"""The transactional outbox: deferred work recorded in the same transaction as the change.

A flow that must send mail or deliver a webhook calls :func:`enqueue` on the connection
of the transaction that makes the change, so the work exists if and only if the change
committed. Workers on any instance :func:`claim` due items under a lease (a crashed
worker's items come back when the lease lapses), then :func:`complete` or
:func:`reschedule` them. Nothing here runs the work; ``service.outbox`` does.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bastion.storage.sql.commit_topics import notify_on_commit
from bastion.storage.sql.schema import outbox

__all__ = [
    "ENQUEUED",
    "OutboxItem",
    "backlog",
    "claim",
    "complete",
    "enqueue",
    "fail",
    "renew",
    "reschedule",
]

#: The :meth:`Database.on_commit` topic of a committed :func:`enqueue`.
ENQUEUED = "outbox.enqueued"


@dataclass(frozen=True, slots=True)
class OutboxItem:
    id: str
    kind: str
    payload: dict[str, Any]
    attempts: int
    created_at: int


def backlog(conn: sa.Connection) -> tuple[int, int | None]:
    """Items still to run (not failed for good), and the ``created_at`` of the oldest."""
    waiting = outbox.c.next_attempt_at.is_not(None)
    count, oldest = conn.execute(
        sa.select(sa.func.count(), sa.func.min(outbox.c.created_at)).where(waiting)
    ).one()
    return int(count), None if oldest is None else int(oldest)


def enqueue(conn: sa.Connection, kind: str, payload: dict[str, Any], *, now: float) -> str:
    item_id = str(uuid.uuid4())
    conn.execute(
        outbox.insert().values(
            id=item_id,
            kind=kind,
            payload=json.dumps(payload, separators=(",", ":")),
            attempts=0,
            next_attempt_at=now,
            created_at=int(now),
        )
    )
    notify_on_commit(conn, ENQUEUED)
    return item_id


def claim(conn: sa.Connection, *, now: float, lease: float, limit: int) -> list[OutboxItem]:
    """Due items that no live lease holds, each now leased to the caller.

    The lease is taken row by row with a conditional UPDATE, so two workers racing for
    the same item cannot both win it, on any database.
    """
    free = sa.or_(outbox.c.leased_until.is_(None), outbox.c.leased_until <= now)
    rows = conn.execute(
        sa.select(outbox)
        .where(outbox.c.next_attempt_at.is_not(None), outbox.c.next_attempt_at <= now, free)
        .order_by(outbox.c.next_attempt_at)
        .limit(limit)
    ).all()
    claimed = []
    for row in rows:
        taken = conn.execute(
            outbox.update()
            .where(outbox.c.id == row.id, free)
            .values(leased_until=now + lease, attempts=outbox.c.attempts + 1)
        )
        if taken.rowcount == 1:
            claimed.append(
                OutboxItem(
                    row.id, row.kind, json.loads(row.payload), row.attempts + 1, row.created_at
                )
            )
    return claimed


def renew(conn: sa.Connection, item_ids: list[str], *, now: float, until: float) -> int:
    """Extend the leases still held on ``item_ids`` to ``until``; a lease that lapsed or
    was settled (NULL) is left alone. How many were extended."""
    held = conn.execute(
        outbox.update()
        .where(outbox.c.id.in_(item_ids), outbox.c.leased_until > now)
        .values(leased_until=until)
    )
    return int(held.rowcount)


def complete(conn: sa.Connection, item_id: str) -> None:
    conn.execute(outbox.delete().where(outbox.c.id == item_id))


def reschedule(conn: sa.Connection, item_id: str, *, at: float, error: str) -> None:
    conn.execute(
        outbox.update()
        .where(outbox.c.id == item_id)
        .values(next_attempt_at=at, leased_until=None, last_error=error[:2000])
    )


def fail(conn: sa.Connection, item_id: str, *, now: float, error: str) -> None:
    """Give up on the item: it stays, for an operator to see, but is never tried again."""
    conn.execute(
        outbox.update()
        .where(outbox.c.id == item_id)
        .values(
            next_attempt_at=None, leased_until=None, last_error=error[:2000], failed_at=int(now)
        )
    )
