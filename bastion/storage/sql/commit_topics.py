"""Topics a transaction notifies once it commits.

``notify_on_commit(conn, topic)`` inside a call's ``fn`` asks that the callbacks registered
with :meth:`~storage.sql.database.Database.on_commit` for ``topic`` run once the
transaction has committed; a rolled-back transaction notifies nobody. Every transaction
that ran a data-changing statement notifies :data:`WROTE` (:func:`mark_writes`, an engine
listener), which tells a request's deadline that the call wrote.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

__all__ = ["WROTE", "mark_writes", "notify_on_commit", "take_topics"]

#: ``Connection.info`` key: the topics to notify once the current transaction commits.
_NOTIFY = "bastion.notify_on_commit"


#: The topic every transaction that ran a data-changing statement notifies: read back by
#: :class:`~storage.sql.database.Database` for the request's
#: :class:`~bastion.storage.deadline.Ledger`.
WROTE = "bastion.wrote"
_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "UPSERT")


def mark_writes(conn: sa.Connection, _cursor: Any, statement: str, *_: Any) -> None:
    """``before_cursor_execute``: a data-changing statement marks its transaction."""
    if statement.lstrip()[:7].upper().startswith(_WRITE_VERBS):
        notify_on_commit(conn, WROTE)


def notify_on_commit(conn: sa.Connection, topic: str) -> None:
    """Have ``topic``'s :meth:`~storage.sql.database.Database.on_commit` callbacks run once
    this transaction commits."""
    conn.info.setdefault(_NOTIFY, set()).add(topic)


def take_topics(conn: sa.Connection | None) -> frozenset[str]:
    """The topics the finished transaction asked for, cleared: ``info`` outlives it.

    Only acted on after a commit. A connection the failure invalidated is left alone (its
    ``info`` would reconnect); it is discarded, and its ``info`` with it.
    """
    if conn is None or conn.invalidated:
        return frozenset()
    return frozenset(conn.info.pop(_NOTIFY, ()))
