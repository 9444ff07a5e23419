"""``bastion import authorizer``: an Authorizer 2.x deployment's database into bastion's.

Users (ids, bcrypt hashes as they are, verification times, roles, revoked state, the MFA
switch, ``app_data``), webhooks and their logs, email templates, audit logs and
authenticator apps are written (:mod:`bastion.moving.writer`: idempotent, a newer row
updates). What cannot carry over is counted and named in the summary with the reason:
verification links and one-time codes (signed or sent by Authorizer, short-lived), sessions
(Authorizer's tokens are not bastion's), Authorizer's ``env`` table (bastion's settings are
flags).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from bastion.moving.authorizer_rows import (
    audit_row,
    authenticator_of,
    authorizer_key,
    log_row,
    template_row,
    user_record,
    webhook_row,
)
from bastion.moving.authorizer_source import AuthorizerSource
from bastion.moving.records import RecordProblem, RecordRules, user_of
from bastion.moving.writer import SKIPPED, ImportRun
from bastion.service.secretbox import SecretBox

__all__ = ["LEFT_BEHIND", "import_authorizer"]

#: Authorizer's tables that are not imported, and why (the summary says it).
LEFT_BEHIND = {
    "verification_requests": "their links carry tokens signed by Authorizer: users ask for a "
    "new link",
    "sms_verification_requests": "codes sent by Authorizer expire in minutes: users ask again",
    "otps": "codes sent by Authorizer expire in minutes: users ask again",
    "sessions": "Authorizer's sessions and tokens are not bastion's: users sign in again",
    "session_tokens": "Authorizer's sessions and tokens are not bastion's: users sign in again",
    "mfa_sessions": "Authorizer's sessions and tokens are not bastion's: users sign in again",
    "oauth_states": "an OAuth flow in progress does not survive the move",
    "env": "bastion's settings are flags (README, Moving from Authorizer)",
}


async def import_authorizer(
    run: ImportRun,
    source: AuthorizerSource,
    *,
    rules: RecordRules,
    from_jwt_secret: str | None,
    box: SecretBox | None,
) -> None:
    await _users(run, source, rules)
    rows: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
        "webhooks": ("webhooks", webhook_row),
        "webhook_logs": ("webhook logs", log_row),
        "email_templates": ("email templates", template_row),
        "audit_logs": ("audit logs", audit_row),
    }
    for table, (kind, convert) in rows.items():
        if source.has(table):
            next_page = _pages(source, table)
            while page := await next_page():
                await run.rows(kind, [convert(row) for row in page])
    if source.has("authenticators"):
        await _authenticators(run, source, from_jwt_secret, box)
    for table, reason in LEFT_BEHIND.items():
        if source.has(table):
            rows_there = await trio.to_thread.run_sync(source.count, table)
            if rows_there:
                run.tally.skip_all(table.replace("_", " "), rows_there, reason)


def _pages(source: AuthorizerSource, table: str) -> Callable[[], Awaitable[list[dict[str, Any]]]]:
    """A function that reads the next page of ``table`` in a worker thread ([] at the end)."""
    after = ""

    async def next_page() -> list[dict[str, Any]]:
        nonlocal after
        page = await trio.to_thread.run_sync(source.page, table, after)
        if page:
            after = page[-1]["id"]
        return page

    return next_page


async def _users(run: ImportRun, source: AuthorizerSource, rules: RecordRules) -> None:
    next_page = _pages(source, "users")
    while page := await next_page():
        batch = []
        for row in page:
            try:
                imported = user_of(user_record(row), rules)
            except RecordProblem as exc:
                run.tally.add("users", SKIPPED, str(row["id"]), str(exc))
                continue
            batch.append((imported.user.id, imported))
        await run.users(batch)


async def _authenticators(
    run: ImportRun, source: AuthorizerSource, from_jwt_secret: str | None,
    box: SecretBox | None,
) -> None:  # fmt: skip
    kind = "authenticators"
    key = authorizer_key(from_jwt_secret) if from_jwt_secret else None
    next_page = _pages(source, kind)
    while page := await next_page():
        rows = []
        for row in page:
            found = (
                "give bastion's --client-secret to seal secrets"
                if box is None
                else authenticator_of(row, key=key, box=box)
            )
            if isinstance(found, str):
                run.tally.add(kind, SKIPPED, str(row["id"]), found)
            else:
                rows.append(found.row())
        await run.rows(kind, rows)
