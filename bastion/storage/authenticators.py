"""Users' authenticator apps (TOTP): sync functions over a Connection.

At most one row per user and method ``totp``: enrolment replaces an unverified row and is
run under a per-user lock by the caller. The secret arrives already sealed
(:mod:`bastion.service.secretbox`) and the recovery codes as digests (a JSON list); nothing
here sees either in the clear.

The two writes a login relies on are compare-and-set, so concurrent requests cannot both
win: :func:`record_step` moves ``last_used_step`` forward only (and completes an
enrolment), :func:`use_recovery_code` removes a digest only from the list it read.
"""

from __future__ import annotations

import dataclasses
import json

import sqlalchemy as sa

from bastion.storage.sql.schema import authenticators as table

__all__ = [
    "StoredAuthenticator",
    "enrol",
    "load",
    "record_step",
    "replace_recovery_codes",
    "use_recovery_code",
]

TOTP = "totp"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoredAuthenticator:
    user_id: str
    sealed_secret: str = dataclasses.field(repr=False)
    verified: bool
    last_used_step: int | None
    recovery_digests: tuple[str, ...] = dataclasses.field(repr=False)


def _digests(raw: str | None) -> tuple[str, ...]:
    return tuple(json.loads(raw)) if raw else ()


def load(conn: sa.Connection, user_id: str) -> StoredAuthenticator | None:
    row = conn.execute(
        sa.select(table)
        .where(table.c.user_id == user_id, table.c.method == TOTP)
        .order_by(table.c.verified_at.is_(None), table.c.created_at.desc())
        .limit(1)
    ).first()
    if row is None or not row.secret:
        return None
    return StoredAuthenticator(
        user_id=row.user_id,
        sealed_secret=row.secret,
        verified=row.verified_at is not None,
        last_used_step=row.last_used_step,
        recovery_digests=_digests(row.recovery_codes),
    )


def enrol(
    conn: sa.Connection,
    *,
    row_id: str,
    user_id: str,
    sealed_secret: str,
    recovery_digests: tuple[str, ...],
    now: int,
) -> None:
    """Store a new unverified authenticator, replacing an unverified one."""
    conn.execute(
        table.delete().where(
            table.c.user_id == user_id, table.c.method == TOTP, table.c.verified_at.is_(None)
        )
    )
    conn.execute(
        table.insert().values(
            id=row_id,
            user_id=user_id,
            method=TOTP,
            secret=sealed_secret,
            recovery_codes=json.dumps(list(recovery_digests)),
            verified_at=None,
            last_used_step=None,
            created_at=now,
            updated_at=now,
        )
    )


def reseal(conn: sa.Connection, user_id: str, old: str, new: str) -> None:
    """Replace the sealed secret ``old`` by ``new`` (the same secret under the current
    key); a no-op when another request already did, or the user enrolled again."""
    conn.execute(
        table.update()
        .where(table.c.user_id == user_id, table.c.method == TOTP, table.c.secret == old)
        .values(secret=new)
    )


def record_step(conn: sa.Connection, user_id: str, step: int, *, now: int) -> bool:
    """Accept ``step`` if it is later than the last accepted one; marks the authenticator
    verified. False when another request got there first (or there is no authenticator)."""
    result = conn.execute(
        table.update()
        .where(
            table.c.user_id == user_id,
            table.c.method == TOTP,
            sa.or_(table.c.last_used_step.is_(None), table.c.last_used_step < step),
        )
        .values(
            last_used_step=step,
            verified_at=sa.func.coalesce(table.c.verified_at, now),
            updated_at=now,
        )
    )
    return result.rowcount == 1


def use_recovery_code(conn: sa.Connection, user_id: str, digest: str, *, now: int) -> bool:
    """Remove one recovery-code digest of the user's verified authenticator; True only if
    this call removed it."""
    row = conn.execute(
        sa.select(table.c.id, table.c.recovery_codes).where(
            table.c.user_id == user_id, table.c.method == TOTP, table.c.verified_at.is_not(None)
        )
    ).first()
    if row is None:
        return False
    digests = _digests(row.recovery_codes)
    if digest not in digests:
        return False
    left = [d for d in digests if d != digest]
    result = conn.execute(
        table.update()
        .where(table.c.id == row.id, table.c.recovery_codes == row.recovery_codes)
        .values(recovery_codes=json.dumps(left), updated_at=now)
    )
    return result.rowcount == 1


def replace_recovery_codes(
    conn: sa.Connection, user_id: str, digests: tuple[str, ...], *, now: int
) -> bool:
    """Give the user's verified authenticator a new set of recovery-code digests (the old
    codes stop working); False when there is no verified authenticator."""
    result = conn.execute(
        table.update()
        .where(table.c.user_id == user_id, table.c.method == TOTP, table.c.verified_at.is_not(None))
        .values(recovery_codes=json.dumps(list(digests)), updated_at=now)
    )
    return result.rowcount >= 1
