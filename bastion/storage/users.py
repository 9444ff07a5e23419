"""The user repository: sync functions over a SQLAlchemy ``Connection``.

Call them inside ``storage.db.run(fn, write=...)`` so that each flow's reads and writes
share one transaction. Uniqueness of email and phone number is the application's job
(the spec removes the unique indexes): :func:`insert_unique` checks and inserts, and its
caller holds ``Database.run_locked`` on the identity (``core.auth.user.identity_lock_key``)
around it.

``sessions_valid_after`` is the SQL-side session marker: tokens issued (``iat``) before it
are refused even when the memory store still holds them (see :func:`end_sessions_marker`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from bastion.core.auth.user import User, normalise_email
from bastion.storage.sql.schema import users

__all__ = [
    "UserStatus",
    "delete",
    "email_taken",
    "end_sessions_marker",
    "get_by_email",
    "get_by_id",
    "get_by_phone",
    "insert",
    "insert_unique",
    "list_page",
    "page_after",
    "phone_taken",
    "set_password_hash",
    "status",
    "update",
]


@dataclass(frozen=True, slots=True)
class UserStatus:
    """What token validation needs to know about a user, from SQL."""

    revoked_timestamp: int | None
    sessions_valid_after: int | None

    def accepts(self, issued_at: int) -> bool:
        """A token issued at ``issued_at`` still stands for this user."""
        if self.revoked_timestamp is not None:
            return False
        return self.sessions_valid_after is None or issued_at >= self.sessions_valid_after


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part for part in (value or "").split(",") if part)


def _from_row(row: Any) -> User:
    app_data: dict[str, Any] = {}
    if row.app_data:
        try:
            loaded = json.loads(row.app_data)
        except ValueError:
            loaded = {}
        app_data = loaded if isinstance(loaded, dict) else {}
    return User(
        id=row.id,
        email=row.email,
        email_verified_at=row.email_verified_at,
        phone_number=row.phone_number,
        phone_number_verified_at=row.phone_number_verified_at,
        password_hash=row.password,
        signup_methods=_split(row.signup_methods),
        given_name=row.given_name,
        family_name=row.family_name,
        middle_name=row.middle_name,
        nickname=row.nickname,
        gender=row.gender,
        birthdate=row.birthdate,
        picture=row.picture,
        roles=_split(row.roles),
        created_at=row.created_at,
        updated_at=row.updated_at,
        revoked_timestamp=row.revoked_timestamp,
        is_multi_factor_auth_enabled=row.is_multi_factor_auth_enabled,
        app_data=app_data,
        enrolled_mfa_methods=_split(row.enrolled_mfa_methods or ""),
        has_skipped_mfa_setup_at=row.has_skipped_mfa_setup_at,
        mfa_locked_at=row.mfa_locked_at,
    )


def _values(user: User) -> dict[str, Any]:
    return {
        "email": user.email,
        "email_verified_at": user.email_verified_at,
        "password": user.password_hash,
        "signup_methods": ",".join(user.signup_methods),
        "given_name": user.given_name,
        "family_name": user.family_name,
        "middle_name": user.middle_name,
        "nickname": user.nickname,
        "gender": user.gender,
        "birthdate": user.birthdate,
        "phone_number": user.phone_number,
        "phone_number_verified_at": user.phone_number_verified_at,
        "picture": user.picture,
        "roles": ",".join(user.roles),
        "revoked_timestamp": user.revoked_timestamp,
        "is_multi_factor_auth_enabled": user.is_multi_factor_auth_enabled,
        "app_data": json.dumps(dict(user.app_data), separators=(",", ":")),
        "enrolled_mfa_methods": ",".join(user.enrolled_mfa_methods),
        "has_skipped_mfa_setup_at": user.has_skipped_mfa_setup_at,
        "mfa_locked_at": user.mfa_locked_at,
        "created_at": user.created_at or 0,
        "updated_at": user.updated_at or user.created_at or 0,
    }


def _one(conn: sa.Connection, where: sa.ColumnElement[bool]) -> User | None:
    # Oldest first: if a pre-v2 database still holds duplicates, the original account wins.
    row = conn.execute(
        sa.select(users).where(where).order_by(users.c.created_at, users.c.id).limit(1)
    ).first()
    return None if row is None else _from_row(row)


def get_by_id(conn: sa.Connection, user_id: str) -> User | None:
    return _one(conn, users.c.id == user_id)


def get_by_email(conn: sa.Connection, email: str) -> User | None:
    return _one(conn, users.c.email == normalise_email(email))


def get_by_phone(conn: sa.Connection, phone_number: str) -> User | None:
    return _one(conn, users.c.phone_number == phone_number.strip())


def _taken(conn: sa.Connection, where: sa.ColumnElement[bool], exclude_id: str | None) -> bool:
    query = sa.select(users.c.id).where(where)
    if exclude_id is not None:
        query = query.where(users.c.id != exclude_id)
    return conn.execute(query.limit(1)).first() is not None


def email_taken(conn: sa.Connection, email: str, *, exclude_id: str | None = None) -> bool:
    return _taken(conn, users.c.email == normalise_email(email), exclude_id)


def phone_taken(conn: sa.Connection, phone_number: str, *, exclude_id: str | None = None) -> bool:
    return _taken(conn, users.c.phone_number == phone_number.strip(), exclude_id)


def insert(conn: sa.Connection, user: User) -> None:
    conn.execute(users.insert().values(id=user.id, **_values(user)))


def insert_unique(conn: sa.Connection, user: User) -> str | None:
    """Insert ``user`` unless its email or phone number is taken; returns what was taken
    (``"email"`` / ``"phone_number"``) or None when inserted. Hold the identity locks."""
    if user.email and email_taken(conn, user.email):
        return "email"
    if user.phone_number and phone_taken(conn, user.phone_number):
        return "phone_number"
    insert(conn, user)
    return None


def update(conn: sa.Connection, user: User) -> None:
    """Write every stored field of ``user`` (its id stays)."""
    conn.execute(users.update().where(users.c.id == user.id).values(**_values(user)))


def delete(conn: sa.Connection, user_id: str) -> bool:
    return conn.execute(users.delete().where(users.c.id == user_id)).rowcount > 0


def list_page(
    conn: sa.Connection, *, limit: int, offset: int, query: str | None = None
) -> tuple[list[User], int]:
    """One page of users, newest first, and the total count; ``query`` keeps the users
    whose email, given name, family name or nickname contains it (any case)."""
    where = sa.true()
    if query:
        pattern = (
            "%" + query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        )
        where = sa.or_(
            *(
                sa.func.lower(column).like(pattern, escape="\\")
                for column in (users.c.email, users.c.given_name, users.c.family_name,
                               users.c.nickname)
            )
        )  # fmt: skip
    rows = conn.execute(
        sa.select(users)
        .where(where)
        .order_by(users.c.created_at.desc(), users.c.id)
        .limit(limit)
        .offset(offset)
    ).all()
    total = conn.execute(sa.select(sa.func.count()).select_from(users).where(where)).scalar_one()
    return [_from_row(row) for row in rows], int(total)


def page_after(conn: sa.Connection, *, after_id: str, limit: int) -> list[User]:
    """Up to ``limit`` users whose id sorts after ``after_id``, in id order: a walk over every
    user (an export) one indexed read a page."""
    rows = conn.execute(
        sa.select(users).where(users.c.id > after_id).order_by(users.c.id).limit(limit)
    ).all()
    return [_from_row(row) for row in rows]


def status(conn: sa.Connection, user_id: str) -> UserStatus | None:
    row = conn.execute(
        sa.select(users.c.revoked_timestamp, users.c.sessions_valid_after).where(
            users.c.id == user_id
        )
    ).first()
    if row is None:
        return None
    return UserStatus(row.revoked_timestamp, row.sessions_valid_after)


def end_sessions_marker(conn: sa.Connection, user_id: str, *, valid_after: int) -> None:
    """Refuse every token of the user issued before ``valid_after`` (never moves back)."""
    current = users.c.sessions_valid_after
    conn.execute(
        users.update()
        .where(users.c.id == user_id)
        .where(sa.or_(current.is_(None), current < valid_after))
        .values(sessions_valid_after=valid_after)
    )


def set_password_hash(conn: sa.Connection, user_id: str, password_hash: str, *, now: int) -> None:
    """Replace the stored hash only (an outdated scheme rehashed at login)."""
    conn.execute(
        users.update().where(users.c.id == user_id).values(password=password_hash, updated_at=now)
    )
