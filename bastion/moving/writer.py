"""Writing imported rows into bastion's database: idempotently, in small transactions, never
half a row.

Each batch of users is one transaction holding the identity locks of every user in it (the
locks sign-up takes), so an import can run beside live servers: an address is never given to
two accounts. A row whose id is already there is updated only when the source row is newer
(``updated_at``); otherwise it is left as it is, so a second run of the same import changes
nothing. A dry run makes every decision the same way (it remembers what it would have
written) and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from bastion.core.auth.user import User, identity_lock_keys
from bastion.moving.records import ImportedUser
from bastion.progress import Progress
from bastion.storage import users as user_rows
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import (
    audit_logs,
    authenticators,
    email_templates,
    users,
    webhook_logs,
    webhooks,
)

__all__ = ["Authenticator", "ImportRun", "Tally"]

IMPORTED, UPDATED, UNCHANGED, SKIPPED = "imported", "updated", "unchanged", "skipped"
#: where-labels shown per skip reason in the summary
_EXAMPLES = 5


class Tally:
    """What an import did, per kind of row, and why each skipped row was skipped."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        #: (kind, reason) -> where (line numbers or source ids), in the order met
        self.skipped: dict[tuple[str, str], list[str]] = defaultdict(list)

    def add(self, kind: str, result: str, where: str = "", reason: str = "") -> None:
        self.counts.setdefault(kind, Counter())[result] += 1
        if result == SKIPPED:
            self.skipped[(kind, reason)].append(where)

    def count(self, kind: str, result: str, rows: int) -> None:
        """``rows`` rows of ``kind`` with ``result`` at once (not skipped ones)."""
        self.counts.setdefault(kind, Counter())[result] += rows

    def skip_all(self, kind: str, rows: int, reason: str) -> None:
        """A whole table left out: ``rows`` skipped for one reason."""
        self.counts.setdefault(kind, Counter())[SKIPPED] += rows
        self.skipped[(kind, reason)].append(f"all {rows:,}")

    def summary(self) -> str:
        lines = []
        for kind, counts in self.counts.items():
            results = (IMPORTED, UPDATED, UNCHANGED, SKIPPED)
            lines.append(f"{kind}: " + ", ".join(f"{counts[r]:,} {r}" for r in results))
        if self.skipped:
            lines.append("skipped:")
        for (kind, reason), where in self.skipped.items():
            more = f" (and {len(where) - _EXAMPLES:,} more)" if len(where) > _EXAMPLES else ""
            lines.append(f"  {kind} {', '.join(where[:_EXAMPLES])}{more}: {reason}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Authenticator:
    """An authenticator app to import: its secret already sealed for the user."""

    id: str
    user_id: str
    sealed_secret: str = field(repr=False)
    recovery_digests: tuple[str, ...] = field(repr=False)
    verified_at: int | None
    created_at: int
    updated_at: int

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id, "user_id": self.user_id, "method": "totp",
            "secret": self.sealed_secret, "recovery_codes": json.dumps(list(self.recovery_digests)),
            "verified_at": self.verified_at, "last_used_step": None,
            "created_at": self.created_at, "updated_at": self.updated_at,
        }  # fmt: skip


class ImportRun:
    """One import into ``db``: its tally, and what it gave out and wrote so far (which a dry
    run cannot read back from the database)."""

    def __init__(self, db: Database, *, dry_run: bool, progress: Progress | None = None) -> None:
        self.db, self.dry_run = db, dry_run
        self.tally = Tally()
        self._progress = progress
        self._identities: dict[str, str] = {}
        self._written: dict[str, set[str]] = defaultdict(set)

    async def users(self, batch: Sequence[tuple[str, ImportedUser]]) -> None:
        """One transaction for ``batch`` (``where`` each user came from, the user)."""
        if not batch:
            return
        keys = {
            key
            for _, imported in batch
            for key in identity_lock_keys(
                email=imported.user.email, phone_number=imported.user.phone_number
            )
        }

        def apply(conn: sa.Connection) -> list[tuple[str, str]]:
            return [self._user(conn, imported) for _, imported in batch]

        outcomes = await self.db.run_locked(sorted(keys), apply)
        for (where, _), (result, reason) in zip(batch, outcomes, strict=True):
            self.tally.add("users", result, where, reason)
        self._show("users")

    async def rows(self, kind: str, batch: Sequence[dict[str, Any]]) -> None:
        """Rows of one of :data:`TABLES` (bastion's column names, ``id`` kept), one
        transaction."""
        if not batch:
            return
        spec = TABLES[kind]

        def apply(conn: sa.Connection) -> list[tuple[str, str]]:
            return [self._row(conn, kind, spec, row) for row in batch]

        outcomes = await self.db.run(apply, write=not self.dry_run)
        for row, (result, reason) in zip(batch, outcomes, strict=True):
            self.tally.add(kind, result, str(row["id"]), reason)
        self._show(kind)

    def _show(self, kind: str) -> None:
        if self._progress is not None:
            self._progress(sum(self.tally.counts[kind].values()), kind)

    def has(self, conn: sa.Connection, kind: str, table: sa.Table, row_id: str) -> bool:
        """Whether a row of ``kind`` is in bastion's database or was written by this run."""
        if row_id in self._written[kind]:
            return True
        return conn.execute(sa.select(table.c.id).where(table.c.id == row_id)).first() is not None

    def _user(self, conn: sa.Connection, imported: ImportedUser) -> tuple[str, str]:
        user = imported.user
        if not imported.id_given:  # the account holding its address, if there is one
            holder = next(
                (h for what, _ in _identities(user) if (h := _holder(conn, user, what))), None
            )
            user = user if holder is None else dataclasses.replace(user, id=holder)
        existing = user_rows.get_by_id(conn, user.id)
        if existing is not None and (
            not imported.dated or (user.updated_at or 0) <= (existing.updated_at or 0)
        ):
            return UNCHANGED, ""
        for what, key in _identities(user):
            holder = self._identities.get(key) or _holder(conn, user, what)
            if holder is not None and holder != user.id:
                return SKIPPED, f"its {what} belongs to another account ({holder})"
        for _, key in _identities(user):
            self._identities[key] = user.id
        self._written["users"].add(user.id)
        if self.dry_run:
            return (IMPORTED if existing is None else UPDATED), ""
        if existing is None:
            user_rows.insert(conn, user)
            return IMPORTED, ""
        user_rows.update(
            conn, user
        )  # bastion's own state of the account (its session marker) stays
        return UPDATED, ""

    def _row(
        self, conn: sa.Connection, kind: str, spec: _Table, row: dict[str, Any]
    ) -> tuple[str, str]:
        table = spec.table
        found = conn.execute(sa.select(table).where(table.c.id == row["id"])).first()
        if found is not None and (spec.append_only or row["updated_at"] <= found.updated_at):
            return UNCHANGED, ""
        reason = spec.conflict(conn, row, self) if spec.conflict else None
        if reason is not None:
            return SKIPPED, reason
        self._written[kind].add(row["id"])
        if not self.dry_run:
            if found is None:
                conn.execute(table.insert().values(**row))
            else:
                conn.execute(table.update().where(table.c.id == row["id"]).values(**row))
            if table is authenticators and row.get("verified_at") is not None:
                _mark_totp_enrolled(conn, row["user_id"])
        return (IMPORTED if found is None else UPDATED), ""


def _identities(user: User) -> list[tuple[str, str]]:
    found = []
    if user.email:
        found.append(("email", identity_lock_keys(email=user.email)[0]))
    if user.phone_number:
        found.append(("phone number", identity_lock_keys(phone_number=user.phone_number)[0]))
    return found


def _holder(conn: sa.Connection, user: User, what: str) -> str | None:
    if what == "email":
        found = user_rows.get_by_email(conn, user.email or "")
    else:
        found = user_rows.get_by_phone(conn, user.phone_number or "")
    return None if found is None else found.id


def _mark_totp_enrolled(conn: sa.Connection, user_id: str) -> None:
    user = user_rows.get_by_id(conn, user_id)
    if user is not None and "totp" not in user.enrolled_mfa_methods:
        methods = ",".join((*user.enrolled_mfa_methods, "totp"))
        conn.execute(
            users.update().where(users.c.id == user_id).values(enrolled_mfa_methods=methods)
        )


# ------------------------------------------------------------------ rows of other tables

Conflict = Callable[[sa.Connection, dict[str, Any], ImportRun], str | None]


@dataclass(frozen=True, slots=True)
class _Table:
    table: sa.Table
    #: why a new row cannot go in although its id is free (a unique event name taken), or None
    conflict: Conflict | None = None
    #: rows are history: never updated once there
    append_only: bool = False


def _template_conflict(conn: sa.Connection, row: dict[str, Any], run: ImportRun) -> str | None:
    other = conn.execute(
        sa.select(email_templates.c.id).where(
            email_templates.c.event_name == row["event_name"], email_templates.c.id != row["id"]
        )
    ).first()
    return None if other is None else f"a template for {row['event_name']} exists ({other.id})"


def _log_conflict(conn: sa.Connection, row: dict[str, Any], run: ImportRun) -> str | None:
    there = run.has(conn, "webhooks", webhooks, row["webhook_id"])
    return None if there else "its webhook was not imported"


def _authenticator_conflict(conn: sa.Connection, row: dict[str, Any], run: ImportRun) -> str | None:
    if not run.has(conn, "users", users, row["user_id"]):
        return "its user was not imported"
    verified = conn.execute(
        sa.select(authenticators.c.id).where(
            authenticators.c.user_id == row["user_id"],
            authenticators.c.id != row["id"],
            authenticators.c.verified_at.is_not(None),
        )
    ).first()
    return None if verified is None else "the user enrolled an authenticator in bastion since"


TABLES = {
    "webhooks": _Table(webhooks),
    "webhook logs": _Table(webhook_logs, _log_conflict, append_only=True),
    "email templates": _Table(email_templates, _template_conflict),
    "audit logs": _Table(audit_logs, append_only=True),
    "authenticators": _Table(authenticators, _authenticator_conflict),
}
