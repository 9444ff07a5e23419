"""Where authorize state lives: the memory store, under digests of the secrets.

::

    oauth:pending:<sha256(state)>    a parked authorize request     10 min
    oauth:code:<sha256(code)>        an unredeemed code's grant      10 min
    oauth:issued:<sha256(code)>      the session a code's redemption created (reuse revokes it)

Codes and states are stored as digests, so reading the store never yields a usable code.
"""

from __future__ import annotations

import hashlib
import json

from bastion.core.oauth.rfc6749_code import CODE_TTL, PENDING_TTL, CodeGrant, PendingAuthorize
from bastion.storage.memory.base import MemoryStore

__all__ = ["OAuthStore"]

#: how long a redeemed code is remembered, to revoke its tokens on reuse
ISSUED_TTL = 24 * 60 * 60


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class OAuthStore:
    def __init__(self, memory: MemoryStore) -> None:
        self.memory = memory

    async def park(self, state: str, pending: PendingAuthorize) -> None:
        value = json.dumps(pending.to_dict()).encode()
        await self.memory.set(f"oauth:pending:{_digest(state)}", value, PENDING_TTL)

    async def take_pending(self, state: str) -> PendingAuthorize | None:
        raw = await self.memory.take(f"oauth:pending:{_digest(state)}")
        return None if raw is None else PendingAuthorize.from_dict(json.loads(raw))

    async def store_code(self, code: str, grant: CodeGrant) -> None:
        value = json.dumps(grant.to_dict()).encode()
        await self.memory.set(f"oauth:code:{_digest(code)}", value, CODE_TTL)

    async def take_code(self, code: str) -> CodeGrant | None:
        """Atomic get-and-delete: of concurrent redemptions only one gets the grant."""
        raw = await self.memory.take(f"oauth:code:{_digest(code)}")
        return None if raw is None else CodeGrant.from_dict(json.loads(raw))

    async def remember_issued(self, code: str, user_id: str, sid: str) -> None:
        value = json.dumps({"user_id": user_id, "sid": sid}).encode()
        await self.memory.set(f"oauth:issued:{_digest(code)}", value, ISSUED_TTL)

    async def take_issued(self, code: str) -> tuple[str, str] | None:
        raw = await self.memory.take(f"oauth:issued:{_digest(code)}")
        if raw is None:
            return None
        data = json.loads(raw)
        return str(data["user_id"]), str(data["sid"])
