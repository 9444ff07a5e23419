"""What the drivers need of a storage: a few operations, as typing Protocols.

``SyncDriver`` and ``AsyncDriver`` carry out every effect of the flows over any object
with these methods (``Storage``, or ``AsyncStorage`` whose methods are coroutines): the
transaction rule and the race handling are theirs, so a storage only stores.

- ``begin`` / ``commit`` / ``rollback``: one transaction (the drivers open one for each
  commit of queued writes and for each answer that writes); nothing else runs in it;
- users, found by ``"id"``, ``"email"`` (normalised, as ``User.email`` holds it) or
  ``"phone_number"``: ``insert_user`` is False when the email or phone number is taken;
- records by ``(kind, key)`` for everything else (challenges, authenticators, verification
  requests and their indexes, stored tokens, a user's session nonces), each value a
  plain object the storage keeps as given (pickle it, or encode it your way): ``take``
  removes and returns one in a single step, so of two requests that take the same
  single-use record exactly one gets it; ``swap`` replaces one only while it still
  equals ``old`` (compare-and-set); ``incr`` adds one to a counter and returns it;
- ``emit``: an outbox item (mail, text, webhook, audit row, MFA outcome) written in the
  same transaction as the writes that caused it, delivered by you afterwards.

``MemoryStore`` (``reference.memory``) implements it in memory; ``examples/`` holds one
over the standard library's sqlite3.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from bastion.core.auth.user import User
from bastion.core.state_machines.effects import AuditRecord, EmitWebhook, SendEmail
from bastion.core.state_machines.mfa_effects import RecordMfaOutcome, SendSms

__all__ = ["AsyncStorage", "Kind", "OutboxItem", "Storage", "UserKey"]

UserKey = Literal["id", "email", "phone_number"]
#: the kinds of record the drivers keep: ``challenge`` (id -> Challenge), ``attempts``
#: and ``user_attempts`` (counters), ``authenticator`` (user id -> Authenticator),
#: ``request`` (id -> (VerificationRequest, token)), ``request_token`` (token -> id),
#: ``request_for`` ("email\nidentifier" -> id), ``token`` ("user\nnonce\nkind" -> the
#: stored token), ``sessions`` (user id -> frozenset of session nonces)
Kind = Literal[
    "challenge",
    "attempts",
    "user_attempts",
    "authenticator",
    "request",
    "request_token",
    "request_for",
    "token",
    "sessions",
]
OutboxItem = SendEmail | SendSms | EmitWebhook | AuditRecord | RecordMfaOutcome


class Storage(Protocol):
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def find_user(self, by: UserKey, value: str) -> User | None: ...
    def insert_user(self, user: User) -> bool: ...
    def save_user(self, user: User) -> None: ...
    def get(self, kind: Kind, key: str) -> Any: ...
    def put(self, kind: Kind, key: str, value: Any) -> None: ...
    def take(self, kind: Kind, key: str) -> Any: ...
    def swap(self, kind: Kind, key: str, old: Any, new: Any) -> bool: ...
    def incr(self, kind: Kind, key: str) -> int: ...
    def emit(self, item: OutboxItem) -> None: ...


class AsyncStorage(Protocol):
    """``Storage`` with coroutine methods (asyncio, trio or any loop: the driver only
    awaits them)."""

    async def begin(self) -> None: ...
    async def commit(self) -> None: ...
    async def rollback(self) -> None: ...
    async def find_user(self, by: UserKey, value: str) -> User | None: ...
    async def insert_user(self, user: User) -> bool: ...
    async def save_user(self, user: User) -> None: ...
    async def get(self, kind: Kind, key: str) -> Any: ...
    async def put(self, kind: Kind, key: str, value: Any) -> None: ...
    async def take(self, kind: Kind, key: str) -> Any: ...
    async def swap(self, kind: Kind, key: str, old: Any, new: Any) -> bool: ...
    async def incr(self, kind: Kind, key: str) -> int: ...
    async def emit(self, item: OutboxItem) -> None: ...
