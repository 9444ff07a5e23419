"""Where sessions live: the memory store (fast state) plus the SQL-side marker (truth).

Memory-store layout, one prefix per user and per session family::

    auth:<user_id>:<sid>:<nonce>:session_token   the sealed cookie value   24 h
    auth:<user_id>:<sid>:<nonce>:access_token    the access JWT            access lifetime
    auth:<user_id>:<sid>:<nonce>:refresh_token   the refresh JWT           refresh lifetime
    auth:<user_id>:<sid>:<nonce>:replaced        a rotated-away refresh    refresh lifetime
    auth:<user_id>:<sid>:meta                    what the listing shows    longest lifetime
    auth_index:<user_id>                         the user's sids (an index, one per member)

``nonce`` ties one session's entries together (the ``nonce`` claim); ``sid`` names the
family a login started (the ``sid`` claim), which refresh rotation keeps. So ending one
session, one family or every session of a user is one delete or one prefix delete.

Refresh rotation: the replaced refresh token is remembered under ``replaced``. Presented
again within :data:`REFRESH_GRACE_SECONDS` (two tabs refreshing at once) it is refused
and nothing else happens (never a second live session: the other tab holds the
successor); later, it is a replay: the whole family ends.

The index lets a user's sessions be listed without a scan of all keys. A family ended by
any route (logout, rotation replay, sign-out everywhere) is dropped from it by the next
listing, which finds none of its tokens; expiry drops it on its own.

The SQL side (``service_users.sessions_valid_after`` and ``revoked_timestamp``) is read
through a cache of :data:`STATUS_CACHE_SECONDS`, so a failed memory-store delete leaves a
token alive for at most that long (architecture.md, "State that spans stores"). One read
per user runs at a time: the requests that miss the cache meanwhile take its answer (a
busy user's requests each read it when the entry lapsed: a herd of identical reads every
second). A read that began before :meth:`SessionStore.forget_status` is neither joined
nor cached after it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import trio

from bastion.core.auth.responses import IssuedTokens
from bastion.storage import Storage
from bastion.storage import users as user_rows
from bastion.storage.memory.base import Entry
from bastion.storage.users import UserStatus

__all__ = [
    "REFRESH_GRACE_SECONDS",
    "STATUS_CACHE_SECONDS",
    "USER_AGENT_LIMIT",
    "Replaced",
    "SessionInfo",
    "SessionStore",
]

#: How long a just-replaced refresh token is refused without ending its family (a
#: concurrent refresh from another tab, not a replay).
REFRESH_GRACE_SECONDS = 10
#: How long one process trusts what it read of a user's SQL-side status.
STATUS_CACHE_SECONDS = 1.0
SESSION, ACCESS, REFRESH, REPLACED = "session_token", "access_token", "refresh_token", "replaced"
META = "meta"
#: The longest user agent a listing shows (the raw header, cut).
USER_AGENT_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Replaced:
    token: str
    at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """One session family as its owner's listing shows it (``id`` is the ``sid``)."""

    id: str
    created_at: int
    last_used_at: int
    ip: str
    user_agent: str
    nonce: str

    def to_api_dict(self, *, current: bool) -> dict[str, object]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "last_used_at": self.last_used_at,
            "ip": self.ip,
            "user_agent": self.user_agent,
            "current": current,
        }


@dataclass(frozen=True, slots=True)
class Lifetimes:
    session: int
    access: int
    refresh: int


class SessionStore:
    def __init__(self, storage: Storage, lifetimes: Lifetimes) -> None:
        self.memory = storage.memory
        self.db = storage.db
        self.lifetimes = lifetimes
        self._status: dict[str, tuple[float, UserStatus | None]] = {}
        #: each user's read in flight, set when it ends
        self._reading: dict[str, trio.Event] = {}

    @staticmethod
    def key(user_id: str, sid: str, nonce: str, kind: str) -> str:
        return f"auth:{user_id}:{sid}:{nonce}:{kind}"

    @staticmethod
    def meta_key(user_id: str, sid: str) -> str:
        return f"auth:{user_id}:{sid}:{META}"

    @staticmethod
    def index_key(user_id: str) -> str:
        return f"auth_index:{user_id}"

    @property
    def _longest(self) -> int:
        life = self.lifetimes
        return max(life.session, life.access, life.refresh)

    async def persist(
        self, user_id: str, sid: str, tokens: IssuedTokens, *, ip: str = "", user_agent: str = ""
    ) -> None:
        """Store the tokens; a login starts the family's listing entry, a refresh renews it."""
        life = self.lifetimes
        k = self.key
        now = int(time.time())
        meta_key = self.meta_key(user_id, sid)
        old = await self.memory.get(meta_key)
        meta = {
            "created_at": now if old is None else int(json.loads(old)["created_at"]),
            "last_used_at": now,
            "ip": ip,
            "user_agent": user_agent[:USER_AGENT_LIMIT],
            "nonce": tokens.nonce,
        }
        entries: list[Entry] = [
            (k(user_id, sid, tokens.nonce, SESSION), tokens.session_token.encode(), life.session),
            (k(user_id, sid, tokens.nonce, ACCESS), tokens.access_token.encode(), life.access),
        ]
        if tokens.refresh_token is not None:
            refresh = tokens.refresh_token.encode()
            entries.append((k(user_id, sid, tokens.nonce, REFRESH), refresh, life.refresh))
        entries.append((meta_key, json.dumps(meta).encode(), self._longest))
        index = (self.index_key(user_id), sid, self._longest)
        await self.memory.set_many(entries, index=index)

    async def listing(self, user_id: str) -> list[SessionInfo]:
        """The user's live session families, oldest first; dead ones leave the index."""
        sids = await self.memory.index_members(self.index_key(user_id))
        metas = await self.memory.get_many(*(self.meta_key(user_id, sid) for sid in sids))
        found = [
            SessionInfo(id=sid, **json.loads(raw))
            for sid, raw in zip(sids, metas, strict=True)
            if raw is not None
        ]
        kinds = (SESSION, ACCESS, REFRESH)
        tokens = await self.memory.get_many(
            *(self.key(user_id, s.id, s.nonce, kind) for s in found for kind in kinds)
        )
        live = [
            s for i, s in enumerate(found) if any(tokens[i * len(kinds) : (i + 1) * len(kinds)])
        ]
        dead = set(sids) - {s.id for s in live}
        if dead:
            await self.memory.delete(*(self.meta_key(user_id, sid) for sid in dead))
            await self.memory.index_remove(self.index_key(user_id), *dead)
        return sorted(live, key=lambda s: (s.created_at, s.id))

    async def alive(self, user_id: str, sid: str) -> bool:
        """Is the session family ``sid`` live: its current tokens not logged out, revoked,
        ended with every other session, or expired?"""
        raw = await self.memory.get(self.meta_key(user_id, sid))
        if raw is None:
            return False
        nonce = str(json.loads(raw)["nonce"])
        kinds = (SESSION, ACCESS, REFRESH)
        found = await self.memory.get_many(*(self.key(user_id, sid, nonce, k) for k in kinds))
        return any(value is not None for value in found)

    async def revoke_family(self, user_id: str, sid: str) -> bool:
        """End one of the user's session families; False if the user has no such session."""
        if sid not in {s.id for s in await self.listing(user_id)}:
            return False
        await self.end_family(user_id, sid)
        await self.memory.index_remove(self.index_key(user_id), sid)
        return True

    async def get(self, user_id: str, sid: str, nonce: str, kind: str) -> str | None:
        raw = await self.memory.get(self.key(user_id, sid, nonce, kind))
        return None if raw is None else raw.decode()

    async def delete(self, user_id: str, sid: str, nonce: str) -> None:
        k = self.key
        await self.memory.delete(
            k(user_id, sid, nonce, SESSION),
            k(user_id, sid, nonce, ACCESS),
            k(user_id, sid, nonce, REFRESH),
        )

    async def take_refresh(self, user_id: str, sid: str, nonce: str) -> str | None:
        """The stored refresh token, removed in one step (one caller of many gets it)."""
        raw = await self.memory.take(self.key(user_id, sid, nonce, REFRESH))
        return None if raw is None else raw.decode()

    async def remember_replaced(self, user_id: str, sid: str, nonce: str, token: str) -> None:
        """Keep a rotated-away refresh token, to tell a late duplicate from a replay."""
        value = json.dumps({"token": token, "at": time.time()}).encode()
        await self.memory.set_if_absent(
            self.key(user_id, sid, nonce, REPLACED), value, self.lifetimes.refresh
        )

    async def replaced(self, user_id: str, sid: str, nonce: str) -> Replaced | None:
        raw = await self.memory.get(self.key(user_id, sid, nonce, REPLACED))
        if raw is None:
            return None
        data = json.loads(raw)
        return Replaced(token=str(data["token"]), at=float(data["at"]))

    async def end_family(self, user_id: str, sid: str) -> None:
        await self.memory.delete_prefix(f"auth:{user_id}:{sid}:")

    async def end_memory_sessions(
        self, user_id: str, *, keep: tuple[str, str] | None = None
    ) -> None:
        """Drop every memory-store entry of the user; ``keep`` = (sid, nonce) survives."""
        if keep is None:
            await self.memory.delete_prefix(f"auth:{user_id}:")
            return
        sid, nonce = keep
        life = {
            SESSION: self.lifetimes.session,
            ACCESS: self.lifetimes.access,
            REFRESH: self.lifetimes.refresh,
        }
        keys = [self.key(user_id, sid, nonce, kind) for kind in life]
        keys.append(self.meta_key(user_id, sid))
        life[META] = self._longest
        saved = await self.memory.get_many(*keys)
        await self.memory.delete_prefix(f"auth:{user_id}:")
        await self.memory.set_many(
            [
                (key, value, ttl)
                for key, value, ttl in zip(keys, saved, life.values(), strict=True)
                if value is not None
            ]
        )

    # -- the SQL side ---------------------------------------------------------------------

    async def status(self, user_id: str) -> UserStatus | None:
        asked = time.monotonic()
        cached = self._status.get(user_id)
        if cached is not None and asked - cached[0] < STATUS_CACHE_SECONDS:
            return cached[1]
        pending = self._reading.get(user_id)
        if pending is not None:
            await pending.wait()
            cached = self._status.get(user_id)
            if cached is not None and asked - cached[0] < STATUS_CACHE_SECONDS:
                return cached[1]
        return await self._read_status(user_id)

    async def _read_status(self, user_id: str) -> UserStatus | None:
        started = time.monotonic()
        done = self._reading[user_id] = trio.Event()
        current = False
        try:
            found = await self.db.read(lambda conn: user_rows.status(conn, user_id))
        finally:
            # Still this user's read: no forget_status (a change) came meanwhile.
            if self._reading.get(user_id) is done:
                del self._reading[user_id]
                current = True
            done.set()
        if current:
            if len(self._status) > 100_000:
                self._status.clear()
            self._status[user_id] = (started, found)
        return found

    def forget_status(self, user_id: str) -> None:
        self._status.pop(user_id, None)
        self._reading.pop(user_id, None)

    async def accepts(self, user_id: str, issued_at: object) -> bool:
        if type(issued_at) is not int:
            return False
        found = await self.status(user_id)
        return found is not None and found.accepts(issued_at)
