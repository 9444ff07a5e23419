"""A user's sessions for the super-admin (issue 22): list them, sign one out, or sign
every one out while the account stays usable (``_revoke_access`` also refuses new
logins; this does not).

Signing one out is the user's own ``revoke_session`` with the admin as the actor
(:meth:`service.auth.session_list.SessionListOperations.end_session`). Signing all out
follows architecture.md ("State that spans stores") as ``_revoke_access`` does: the SQL
marker (``sessions_valid_after``) commits first with its audit row and webhook event,
refusing every older token on every instance, then the memory-store entries go.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sqlalchemy as sa

from bastion.core.auth.user import User
from bastion.core.errors import InvalidArgument, NotFound
from bastion.service.access import Service
from bastion.service.audit import record_admin_action
from bastion.service.auth.service import AuthService
from bastion.service.context import CallerContext, Reply
from bastion.storage import Storage, users
from bastion.storage.outbox import enqueue

__all__ = [
    "ADMIN_SESSIONS_REVOKED",
    "SESSIONS_REVOKED_EVENT",
    "RevokeUserSessionRequest",
    "UserSessionAdmin",
    "UserSessionsRequest",
]

log = logging.getLogger("bastion.admin")

#: The webhook event and admin audit action of every session of a user signed out.
SESSIONS_REVOKED_EVENT = "user.sessions_revoked"
ADMIN_SESSIONS_REVOKED = "admin.sessions_revoked"
ALL_REVOKED = "user sessions revoked successfully"
USER_NOT_FOUND = "user not found"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserSessionsRequest:
    user_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RevokeUserSessionRequest:
    user_id: str = ""
    id: str = ""


class UserSessionAdmin:
    def __init__(self, service: Service, auth: AuthService, storage: Storage) -> None:
        self._service = service
        self._auth = auth
        self._db = storage.db
        self._listeners = storage.webhook_listeners

    async def _user(self, user_id: str) -> User:
        if not user_id:
            raise InvalidArgument("user_id is required")
        found = await self._db.read(lambda c: users.get_by_id(c, user_id))
        if found is None:
            raise NotFound(USER_NOT_FOUND)
        return found

    async def user_sessions(self, request: UserSessionsRequest, caller: CallerContext) -> Reply:
        """The user's live sessions, oldest first; none is the admin's own (``current``
        is false)."""
        await self._service.require_admin(caller)
        user = await self._user(request.user_id)
        found = await self._auth.sessions.listing(user.id)
        return Reply({"sessions": [s.to_api_dict(current=False) for s in found]})

    async def revoke_user_session(
        self, request: RevokeUserSessionRequest, caller: CallerContext
    ) -> Reply:
        await self._service.require_admin(caller)
        user = await self._user(request.user_id)
        await self._auth.end_session(user.id, request.id, caller, by_admin=True)
        return Reply({"message": "session revoked successfully"})

    async def revoke_all_user_sessions(
        self, request: UserSessionsRequest, caller: CallerContext
    ) -> Reply:
        await self._service.require_admin(caller)
        user_id = request.user_id
        if not user_id:
            raise InvalidArgument("user_id is required")
        now = int(self._auth.clock.now())
        listening = await self._listeners.listening(SESSIONS_REVOKED_EVENT)

        def write(conn: sa.Connection) -> None:
            user = users.get_by_id(conn, user_id)
            if user is None:
                raise NotFound(USER_NOT_FOUND)
            # Not ``now + 1`` as for a revoked account: this user may sign in again at once.
            # A token of this very second dies with the memory-store entries below.
            users.end_sessions_marker(conn, user.id, valid_after=now)
            record_admin_action(
                conn, caller, ADMIN_SESSIONS_REVOKED, resource_type="user", resource_id=user.id
            )
            if listening:
                payload = {
                    "event_name": SESSIONS_REVOKED_EVENT,
                    "user": user.to_api_dict(),
                    "auth_recipe": "",
                }
                enqueue(conn, "webhook_event", payload, now=now)

        await self._db.run(write, write=True)
        sessions = self._auth.sessions
        sessions.forget_status(user_id)
        try:
            await sessions.end_memory_sessions(user_id)
        except Exception:
            # The SQL marker already refuses every token of the user.
            log.warning("could not drop the user's sessions from the memory store",
                        extra={"user_id": user_id}, exc_info=True)  # fmt: skip
        return Reply({"message": ALL_REVOKED})
