"""An in-memory store for the reference driver: everything a flow reads or writes.

Plain dicts and lists, one process, no persistence: for tests, examples and as a map of
what a real store must hold. ``outbox`` is what a real driver would queue for delivery
(mails, texts, webhooks) in the same transaction as the writes that caused it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bastion.core.auth.mfa import Challenge
from bastion.core.auth.totp import Authenticator
from bastion.core.auth.user import User, normalise_email
from bastion.core.auth.verification import VerificationRequest
from bastion.core.state_machines.effects import AuditRecord, EmitWebhook, SendEmail
from bastion.core.state_machines.mfa_effects import MfaOutcome, SendSms

__all__ = ["MemoryStore", "Outbox"]


@dataclasses.dataclass
class Outbox:
    mails: list[SendEmail] = dataclasses.field(default_factory=list)
    texts: list[SendSms] = dataclasses.field(default_factory=list)
    webhooks: list[EmitWebhook] = dataclasses.field(default_factory=list)
    audit: list[AuditRecord] = dataclasses.field(default_factory=list)
    mfa_outcomes: list[MfaOutcome] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class MemoryStore:
    users: dict[str, User] = dataclasses.field(default_factory=dict)
    #: verification requests by id, with the signed token their link carries
    requests: dict[str, tuple[VerificationRequest, str]] = dataclasses.field(default_factory=dict)
    challenges: dict[str, Challenge] = dataclasses.field(default_factory=dict)
    #: wrong-or-right codes compared, per challenge and per user
    attempts: dict[str, int] = dataclasses.field(default_factory=dict)
    user_attempts: dict[str, int] = dataclasses.field(default_factory=dict)
    authenticators: dict[str, Authenticator] = dataclasses.field(default_factory=dict)
    #: stored tokens by (user id, session nonce, kind)
    sessions: dict[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    outbox: Outbox = dataclasses.field(default_factory=Outbox)

    def user_by(self, **where: Any) -> User | None:
        """The user with that ``user_id``, ``email`` or ``phone_number`` (exactly one)."""
        ((field, value),) = where.items()
        if field == "user_id":
            return self.users.get(value)
        if field == "email":
            value = normalise_email(value)
        return next((u for u in self.users.values() if getattr(u, field) == value), None)

    def insert_user(self, user: User) -> bool:
        """False when its email or phone number is taken."""
        taken = any(
            (user.email and u.email == user.email)
            or (user.phone_number and u.phone_number == user.phone_number)
            for u in self.users.values()
        )
        if not taken:
            self.users[user.id] = user
        return not taken

    def request_by_token(self, token: str) -> VerificationRequest | None:
        return next((r for r, t in self.requests.values() if t == token), None)

    def request_by_email(self, email: str, identifier: str) -> VerificationRequest | None:
        found = (
            r for r, _ in self.requests.values() if (r.email, r.identifier) == (email, identifier)
        )
        return next(found, None)

    def drop_requests_for(self, email: str) -> None:
        for request_id in [i for i, (r, _) in self.requests.items() if r.email == email]:
            del self.requests[request_id]

    def end_sessions(self, user_id: str, *, keep_nonce: str | None = None) -> None:
        for key in [k for k in self.sessions if k[0] == user_id and k[1] != keep_nonce]:
            del self.sessions[key]
