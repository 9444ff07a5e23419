"""When an account's email address changes, the old address is told, with a link that
undoes the change: whoever took over a session cannot quietly move the address that
password resets go to.

The link carries a signed token (our JWT key, ``purpose: undo_email_change``, the user's
id, both addresses, seven days) that works once. Following it shows a page with one
button (a mail scanner that fetches links must not undo a change the owner made); the
button puts the old address back, verified (its owner just proved it), drops the new
address's pending verification and ends every session of the account.

The undo wins (issue 36): it restores the old address even when the account was moved
again since (and the later change's undo links then undo nothing), an account that took
the freed old address without proving it loses it, and the passkeys and authenticator
added since the change go with the sessions, all in one transaction.
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

from bastion.core.auth.user import User
from bastion.core.errors import FailedPrecondition, InvalidArgument, NotFound
from bastion.service.auth.parts import AuthParts
from bastion.service.context import CallerContext, Reply
from bastion.service.mail import Mail
from bastion.service.tokens import InvalidToken
from bastion.storage import admin_users
from bastion.storage import passkeys as passkey_rows
from bastion.storage import users as user_rows
from bastion.storage import verification as verification_rows
from bastion.storage.audit import AuditEntry, record

__all__ = ["UNDO_PATH", "UNDO_TTL_SECONDS", "change_notice", "undo_email_change"]

UNDO_PURPOSE = "undo_email_change"
UNDO_TTL_SECONDS = 7 * 24 * 3600
#: Where the link lands (an HTTP view of :mod:`transports.rest.auth`).
UNDO_PATH = "/undo_email_change"
INVALID_LINK = "this link is not valid any more"


def change_notice(auth: AuthParts, user: User, old_email: str, now: int) -> Mail:
    """The mail to ``old_email`` about the change to ``user.email``, with the undo link."""
    claims = {
        "iss": auth.policy.issuer,
        "sub": user.id,
        "purpose": UNDO_PURPOSE,
        "old_email": old_email,
        "new_email": user.email or "",
        "nonce": auth.ids.new_id(),
        "iat": now,
        "exp": now + UNDO_TTL_SECONDS,
    }
    link = f"{auth.policy.issuer}{UNDO_PATH}?token={quote(auth.signer.sign(claims))}"
    settings = auth.settings
    org = html.escape(settings.organization_name)
    name = html.escape(user.given_name or old_email)
    body = (
        "<!DOCTYPE html><html><body>"
        f"<p>Hi {name},</p>"
        f"<p>The email address of your {org} account was changed from "
        f"<b>{html.escape(old_email)}</b> to <b>{html.escape(user.email or '')}</b>.</p>"
        "<p>If you did not do this, undo it here (the link works once, for seven days); "
        "every session of the account will end:</p>"
        f'<p><a href="{html.escape(link)}">Undo the change</a></p><p>{html.escape(link)}</p>'
        f"<p>If you made this change, you can ignore this email.</p><p>{org}</p>"
        "</body></html>"
    )
    text = (
        f"The email address of your {settings.organization_name} account was changed from "
        f"{old_email} to {user.email or ''}.\n\nIf you did not do this, undo it here (the "
        f"link works once, for seven days); every session of the account will end:\n\n"
        f"{link}\n\nIf you made this change, you can ignore this email.\n"
    )
    return Mail(to=old_email, subject="Your email address was changed", html=body, text=text)


def _claims(auth: AuthParts, token: str, now: int) -> dict[str, Any]:
    try:
        claims = auth.signer.verify(token)
    except InvalidToken:
        raise InvalidArgument(INVALID_LINK) from None
    exp, iat = claims.get("exp"), claims.get("iat")
    fields = (claims.get("sub"), claims.get("old_email"), claims.get("new_email"))
    if (
        claims.get("purpose") != UNDO_PURPOSE
        or type(exp) is not int
        or type(iat) is not int
        or exp <= now
        or not all(isinstance(f, str) and f for f in fields)
        or not isinstance(claims.get("nonce"), str)
    ):
        raise InvalidArgument(INVALID_LINK)
    return claims


def _void_key(user_id: str) -> str:
    return f"undo_email_void:{user_id}"


def _voided(window: bytes | None, changed_at: int) -> bool:
    """Is a link for a change at ``changed_at`` one an undo already went past? (it
    notified a later change than the one undone, made before that undo)"""
    if window is None:
        return False
    start, _, end = window.decode().partition(":")
    return int(start) <= changed_at <= int(end)


def _free_address(conn: sa.Connection, holder: User, now: int) -> None:
    """The old address, held unverified by another account since the change: that account
    loses it (it never proved it; the owner just did) and its sessions end."""
    if holder.email_verified:
        raise FailedPrecondition("the old email address now belongs to another account")
    freed = dataclasses.replace(holder, email=None, email_verified_at=None, updated_at=now)
    user_rows.update(conn, freed)
    user_rows.end_sessions_marker(conn, holder.id, valid_after=now + 1)


async def undo_email_change(auth: AuthParts, token: str, caller: CallerContext) -> Reply:
    """The undo wins (issue 36): whatever happened since the change, the old address comes
    back (an unverified account holding it loses it), and everything the change let in
    ends: every session, the passkeys and authenticator added since, the pending
    verification of every later address, and the undo links of later changes."""
    now = int(auth.clock.now())
    claims = _claims(auth, token, now)
    user_id, old, new = claims["sub"], claims["old_email"], claims["new_email"]
    changed_at: int = claims["iat"]
    memory = auth.storage.memory
    if _voided(await memory.get(_void_key(user_id)), changed_at):
        raise InvalidArgument(INVALID_LINK)
    used = f"undo_email:{claims['nonce']}"
    if not await memory.set_if_absent(used, b"1", ttl=UNDO_TTL_SECONDS):
        raise InvalidArgument(INVALID_LINK)

    def write(conn: sa.Connection) -> tuple[User, str | None]:
        user = user_rows.get_by_id(conn, user_id)
        if user is None:
            raise NotFound("user not found")
        holder = user_rows.get_by_email(conn, old)
        freed = None
        if holder is not None and holder.id != user.id:
            _free_address(conn, holder, now)
            freed = holder.id
        restored = dataclasses.replace(user, email=old, email_verified_at=now, updated_at=now)
        user_rows.update(conn, restored)
        for address in {new, user.email or new}:
            if address != old:
                verification_rows.delete_for_email(conn, address)
        passkey_rows.delete_for_user(conn, user.id, since=changed_at)
        admin_users.delete_authenticators(conn, user.id, since=changed_at)
        user_rows.end_sessions_marker(conn, user.id, valid_after=now + 1)
        entry = AuditEntry(
            action="user.email_change_undone",
            actor_id=user.id,
            actor_email=old,
            resource_type="user",
            resource_id=user.id,
            ip_address=caller.client_ip,
            user_agent=caller.user_agent,
            protocol=caller.protocol.value,
            metadata={"undone_email": new, "current_email": user.email or "", "freed_from": freed},
        )
        record(conn, entry, now=now)
        return restored, freed

    try:
        restored, freed = await auth.storage.db.run(write, write=True)
    except Exception:
        await memory.delete(used)  # nothing was written: the link still works
        raise
    # Undo links of the changes made since this one (mailed to addresses the account held
    # after it) undo nothing any more.
    await memory.set(_void_key(user_id), f"{changed_at}:{now}".encode(), ttl=UNDO_TTL_SECONDS)
    for ended in (restored.id, freed):
        if ended is not None:
            auth.sessions.forget_status(ended)
            await auth.sessions.end_memory_sessions(ended)
    return Reply(
        {
            "message": "The change was undone: the account's email address is "
            f"{old} again and every session has ended. If you did not make the change, "
            "reset your password now."
        }
    )
