"""A user's own sessions: the listing, and signing one of them out (issue 22).

A session here is a login's family (its ``sid``): refresh rotation keeps it, so one
device stays one row. Revoking ends every token of that family in the shared memory
store, which every instance reads on every request: refused at once, everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from bastion.core.errors import InvalidArgument, NotFound
from bastion.service.auth.account import AccountOperations
from bastion.service.context import CallerContext, Reply
from bastion.service.requests import EmptyRequest

__all__ = ["REVOKED", "SESSION_NOT_FOUND", "RevokeSessionRequest", "SessionListOperations"]

SESSION_NOT_FOUND = "session not found"
REVOKED = "session revoked successfully"


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
        if not request.id:
            raise InvalidArgument("id is required")
        # Another user's id is as unknown as a made-up one: nothing is told about it.
        if not await self.sessions.revoke_family(who.user_id, request.id):
            raise NotFound(SESSION_NOT_FOUND)
        return Reply({"message": REVOKED})
