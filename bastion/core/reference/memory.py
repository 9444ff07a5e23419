"""An in-memory ``Storage`` (``reference.storage``): everything a flow reads or writes.

Plain dicts and lists, one process, no persistence: for tests, examples and as a map of
what a real store must hold. ``outbox`` is what a real driver would queue for delivery
(mails, texts, webhooks) in the same transaction as the writes that caused it. Every
method runs whole without yielding, which makes each one atomic for threads (under the
GIL) and for tasks alike; there is no rollback (the drivers undo what a refused commit
kept).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bastion.core.auth.user import User, normalise_email
from bastion.core.reference.storage import Kind, OutboxItem, UserKey
from bastion.core.state_machines.effects import AuditRecord, EmitWebhook, SendEmail
from bastion.core.state_machines.mfa_effects import MfaOutcome, RecordMfaOutcome, SendSms

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
    #: every other record by (kind, key): see ``reference.storage.Kind``
    records: dict[tuple[Kind, str], Any] = dataclasses.field(default_factory=dict)
    outbox: Outbox = dataclasses.field(default_factory=Outbox)

    def begin(self) -> None:
        pass

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def find_user(self, by: UserKey, value: str) -> User | None:
        if by == "id":
            return self.users.get(value)
        if by == "email":
            value = normalise_email(value)
        return next((u for u in self.users.values() if getattr(u, by) == value), None)

    def insert_user(self, user: User) -> bool:
        taken = any(
            (user.email and u.email == user.email)
            or (user.phone_number and u.phone_number == user.phone_number)
            for u in self.users.values()
        )
        if not taken:
            self.users[user.id] = user
        return not taken

    def save_user(self, user: User) -> None:
        self.users[user.id] = user

    def get(self, kind: Kind, key: str) -> Any:
        return self.records.get((kind, key))

    def put(self, kind: Kind, key: str, value: Any) -> None:
        self.records[(kind, key)] = value

    def take(self, kind: Kind, key: str) -> Any:
        return self.records.pop((kind, key), None)

    def swap(self, kind: Kind, key: str, old: Any, new: Any) -> bool:
        if self.records.get((kind, key)) != old:
            return False
        self.records[(kind, key)] = new
        return True

    def incr(self, kind: Kind, key: str) -> int:
        count: int = self.records.get((kind, key), 0) + 1
        self.records[(kind, key)] = count
        return count

    def emit(self, item: OutboxItem) -> None:
        match item:
            case SendEmail():
                self.outbox.mails.append(item)
            case SendSms():
                self.outbox.texts.append(item)
            case EmitWebhook():
                self.outbox.webhooks.append(item)
            case AuditRecord():
                self.outbox.audit.append(item)
            case RecordMfaOutcome(outcome=outcome):
                self.outbox.mfa_outcomes.append(outcome)
