"""A user's sessions: the listing, and signing one of them out (issue 22), for the user
and (through :mod:`service.admin.user_sessions`) for the super-admin.

A session here is a login's family (its ``sid``): refresh rotation keeps it, so one
device stays one row. Revoking ends every token of that family in the shared memory
store, which every instance reads on every request: refused at once, everywhere. The
audit row and the ``user.session_revoked`` webhook event are written after the memory
store let the session go (what was not revoked is not recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from bastion.core.errors import InvalidArgument, NotFound
from bastion.core.state_machines.effects import AuditAction
from bastion.service.audit import record_admin_action
from bastion.service.auth.account import AccountOperations
from bastion.service.context import CallerContext, Reply
from bastion.service.requests import EmptyRequest
from bastion.storage import users as user_rows
from bastion.storage.audit import AuditEntry, record
from bastion.storage.outbox import enqueue

__all__ = [
    "ADMIN_SESSION_REVOKED",
    "REVOKED",
    "SESSION_NOT_FOUND",
    "SESSION_REVOKED_EVENT",
    "RevokeSessionRequest",
    "SessionListOperations",
]

SESSION_NOT_FOUND = "session not found"
REVOKED = "session revoked successfully"
#: The webhook event of one session signed out, by its user or by the admin.
SESSION_REVOKED_EVENT = "user.session_revoked"
#: The admin's audit action for it (the user's own is ``AuditAction.SESSION_REVOKED``).
ADMIN_SESSION_REVOKED = "admin.session_revoked"


@dataclass(frozen=True, slots=True, kw_only=True)
class RevokeSessionRequest:
    id: str = ""


class SessionListOperations(AccountOperations):
    """``sessions`` and ``revoke_session`` of :class:`service.auth.service.AuthService`."""

    async def sessions_of_caller(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        who = await self.require_caller(caller)
        found = await self.sessions.listing(who.user_id)
        # The caller's own session first, then the others oldest first.
        ordered = sorted(found, key=lambda s: s.id != who.sid)
        return Reply({"sessions": [s.to_api_dict(current=s.id == who.sid) for s in ordered]})

    async def revoke_session(self, request: RevokeSessionRequest, caller: CallerContext) -> Reply:
        who = await self.require_caller(caller)
        # Another user's id is as unknown as a made-up one: nothing is told about it.
        await self.end_session(who.user_id, request.id, caller, by_admin=False)
        return Reply({"message": REVOKED})

    # -- shared with the admin's operations --------------------------------------------------

    async def end_session(
        self, user_id: str, sid: str, caller: CallerContext, *, by_admin: bool
    ) -> None:
        """End one of the user's sessions, then record who did it and announce it."""
        if not sid:
            raise InvalidArgument("id is required")
        if not await self.sessions.revoke_family(user_id, sid):
            raise NotFound(SESSION_NOT_FOUND)
        now = int(self.clock.now())
        listening = await self.storage.webhook_listeners.listening(SESSION_REVOKED_EVENT)
        metadata = {"session": sid}

        def write(conn: sa.Connection) -> None:
            user = user_rows.get_by_id(conn, user_id)
            if by_admin:
                record_admin_action(
                    conn, caller, ADMIN_SESSION_REVOKED, resource_type="user",
                    resource_id=user_id, metadata=metadata,
                )  # fmt: skip
            else:
                entry = AuditEntry(
                    action=AuditAction.SESSION_REVOKED.value,
                    actor_id=user_id,
                    actor_email=None if user is None else user.email,
                    resource_type="user",
                    resource_id=user_id,
                    ip_address=caller.client_ip,
                    user_agent=caller.user_agent,
                    protocol=caller.protocol.value,
                    metadata=metadata,
                )
                record(conn, entry, now=now)
            if listening and user is not None:
                payload = {
                    "event_name": SESSION_REVOKED_EVENT,
                    "user": user.to_api_dict(),
                    "auth_recipe": "",
                }
                enqueue(conn, "webhook_event", payload, now=now)

        await self.storage.db.run(write, write=True)
