"""``service_users`` held locked from another connection: how the server tests make a
request wait on the database (a login reads the table; so does gRPC readiness)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import pymysql
from sqlalchemy.engine import make_url


def postgres_dsn(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL (any driver) as a libpq connection string."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextlib.contextmanager
def postgres_users_locked(url: str) -> Iterator[None]:
    with psycopg.connect(postgres_dsn(url)) as locker:
        locker.execute("lock table service_users in access exclusive mode")
        try:
            yield
        finally:
            locker.rollback()


@contextlib.contextmanager
def mariadb_users_locked(url: str) -> Iterator[None]:
    parts = make_url(url)
    locker = pymysql.connect(
        host=parts.host,
        port=parts.port or 3306,
        user=parts.username,
        password=parts.password or "",
        database=parts.database,
    )
    try:
        locker.cursor().execute("LOCK TABLES service_users WRITE")
        yield
    finally:
        locker.cursor().execute("UNLOCK TABLES")
        locker.close()
