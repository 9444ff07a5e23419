"""The SQL a :class:`~service.auth.driver.FlowRun` queues and the row it loads.

Queued steps are ``SqlOp``: the driver commits them together in one transaction (or a
lone :class:`OneInsert` without one). A step that spends a verification request, an
authenticator code or a recovery code is a compare-and-set: when someone else spent it
first it raises :class:`Consumed`, the transaction rolls back and the driver refuses the
request (issue 27). ``audit_entry`` and ``load_user`` serve the OAuth and passkey
drivers too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from bastion.core.auth.user import User
from bastion.core.state_machines.effects import AuditRecord, LoadUser
from bastion.core.state_machines.mfa_verify import INVALID_OTP
from bastion.service.context import CallerContext
from bastion.storage import admin_users
from bastion.storage import authenticators as authenticator_rows
from bastion.storage import passkeys as passkey_rows
from bastion.storage import users as user_rows
from bastion.storage import verification as requests
from bastion.storage.audit import AuditEntry, record
from bastion.storage.outbox import enqueue

__all__ = [
    "Consumed",
    "OneInsert",
    "SqlOp",
    "audit_entry",
    "consume_request",
    "drop_credentials",
    "drop_pending_links",
    "enqueue_item",
    "load_user",
    "record_entry",
    "record_totp_step",
    "use_recovery_code",
]

SqlOp = Callable[[sa.Connection], None]


class OneInsert:
    """An SQL step that is a single INSERT: alone in a flush, it needs no transaction."""

    __slots__ = ("_insert",)

    def __init__(self, insert: SqlOp) -> None:
        self._insert = insert

    def __call__(self, conn: sa.Connection) -> None:
        self._insert(conn)


class Consumed(Exception):
    """A verification request, an authenticator code or a recovery code was used (or the
    request replaced) by someone else first; ``message``: the refusal, if not the link's."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message)
        self.message = message


def audit_entry(effect: AuditRecord, caller: CallerContext) -> AuditEntry:
    """The row ``effect`` asks for, with where the call came from (the OAuth flow's driver
    writes them too)."""
    return AuditEntry(
        action=effect.action.value,
        actor_id=effect.actor_id,
        actor_email=effect.actor_email,
        resource_type=effect.resource_type,
        resource_id=effect.resource_id,
        ip_address=caller.client_ip,
        user_agent=caller.user_agent,
        protocol=caller.protocol.value,
        metadata=dict(effect.metadata),
    )


def load_user(conn: sa.Connection, effect: LoadUser) -> User | None:
    """The user ``effect`` names (the OAuth flow's driver answers with it too)."""
    if effect.user_id is not None:
        user = user_rows.get_by_id(conn, effect.user_id)
    elif effect.email is not None:
        user = user_rows.get_by_email(conn, effect.email)
    else:
        user = user_rows.get_by_phone(conn, effect.phone_number or "")
    if user is None or effect.session_started is None:
        return user
    status = user_rows.status(conn, user.id)
    return user if status is not None and status.accepts(effect.session_started) else None


def enqueue_item(conn: sa.Connection, kind: str, payload: dict[str, Any], now: int) -> None:
    enqueue(conn, kind, payload, now=now)


def record_entry(conn: sa.Connection, entry: AuditEntry, now: int) -> None:
    record(conn, entry, now=now)


def drop_pending_links(conn: sa.Connection, user_id: str) -> None:
    user = user_rows.get_by_id(conn, user_id)
    if user is not None and user.email:
        requests.delete_for_email(conn, user.email)


def drop_credentials(conn: sa.Connection, user_id: str) -> None:
    """The user's passkeys and authenticator (``DeleteUserSessions.end_credentials``)."""
    passkey_rows.delete_for_user(conn, user_id)
    admin_users.delete_authenticators(conn, user_id)


def consume_request(conn: sa.Connection, request_id: str) -> None:
    if not requests.consume(conn, request_id):
        raise Consumed


def record_totp_step(conn: sa.Connection, user_id: str, step: int, now: int) -> None:
    if not authenticator_rows.record_step(conn, user_id, step, now=now):
        raise Consumed(INVALID_OTP)  # this step or a later one was accepted meanwhile


def use_recovery_code(conn: sa.Connection, user_id: str, digest: str, now: int) -> None:
    if not authenticator_rows.use_recovery_code(conn, user_id, digest, now=now):
        raise Consumed(INVALID_OTP)  # spent meanwhile (or the codes were replaced)
