"""An Authorizer 2.x database, read as Authorizer's GORM models created it.

Tables carry the ``authorizer_`` prefix and the models' fields in snake case
(``authorizer_users.email_verified_at``, ``authorizer_webhooks.end_point``). Columns are
read by name and only those present are asked for, so a 2.0 database (fewer columns) and a
2.4 one (``is_active``, ``external_id``, ...) read the same way. Rows come in id order, a
page at a time.

``--from-database-url`` is taken as Authorizer took its ``--database-url``: a PostgreSQL URL,
a SQLite file path (or ``file:`` URI), or a MySQL/MariaDB URL in Go's DSN form
(``user:pass@tcp(host:3306)/db?parseTime=true``) or ``mysql://``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import sqlalchemy as sa
from sqlalchemy.engine import URL

from bastion.storage.config import StorageConfig, sqlalchemy_url

__all__ = ["SOURCE_TYPES", "AuthorizerSource", "open_source", "source_url"]

PREFIX = "authorizer_"
#: Authorizer's ``--database-type`` values bastion reads, and the database each one is.
SOURCE_TYPES = {
    "postgres": "postgres", "postgresql": "postgres", "yugabyte": "postgres",
    "cockroachdb": "postgres", "sqlite": "sqlite", "mysql": "mysql", "mariadb": "mysql",
    "planetscale": "mysql",
}  # fmt: skip
_GO_DSN = re.compile(
    r"(?:(?P<user>[^:@/]*)(?::(?P<password>[^@/]*))?@)?"
    r"(?:(?P<net>tcp|unix)\((?P<address>[^)]*)\))?/(?P<database>[^?]*)(?:\?(?P<query>.*))?"
)
#: Go driver parameters that mean nothing to PyMySQL.
_GO_ONLY = frozenset({"parseTime", "loc", "allowNativePasswords", "tls", "timeout"})
PAGE = 1000


def source_url(database_type: str, database_url: str) -> URL:
    """The SQLAlchemy URL of an Authorizer database given as Authorizer's flags give it."""
    kind = SOURCE_TYPES.get(database_type.lower())
    if kind is None:
        raise ValueError(
            f"--from-database-type {database_type!r} is not one bastion reads "
            f"(one of {', '.join(sorted(SOURCE_TYPES))})"
        )
    url = database_url.strip()
    if kind == "sqlite":
        url = url.removeprefix("file:").split("?", 1)[0]
    elif kind == "mysql" and "://" not in url:
        url = _mysql_from_go_dsn(url)
    return sqlalchemy_url(StorageConfig(database_type=kind, database_url=url))


def _mysql_from_go_dsn(dsn: str) -> str:
    match = _GO_DSN.fullmatch(dsn)
    if match is None or match["net"] == "unix":
        raise ValueError("--from-database-url is not a MySQL DSN (user:pass@tcp(host:port)/db)")
    userinfo = quote(match["user"] or "", safe="")
    if match["password"] is not None:
        userinfo += ":" + quote(match["password"], safe="")
    query = [(k, v) for k, v in parse_qsl(match["query"] or "") if k not in _GO_ONLY]
    tail = f"?{urlencode(query)}" if query else ""
    at = "@" if userinfo else ""
    return f"mysql://{userinfo}{at}{match['address'] or 'localhost:3306'}/{match['database']}{tail}"


class AuthorizerSource:
    """Read access to one Authorizer database (blocking calls: run them in a thread)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._metadata = sa.MetaData()
        inspector = sa.inspect(engine)
        self.tables = {
            name.removeprefix(PREFIX)
            for name in inspector.get_table_names()
            if name.startswith(PREFIX)
        }
        #: whether OpenFGA's own tables are here: Authorizer's embedded engine kept its
        #: store in this database
        self.openfga_tables = {"tuple", "authorization_model", "store"} <= set(
            inspector.get_table_names()
        )

    def has(self, table: str) -> bool:
        return table in self.tables

    def count(self, table: str) -> int:
        query = sa.select(sa.func.count()).select_from(self._table(table))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def page(self, table: str, after: str) -> list[dict[str, Any]]:
        """Up to :data:`PAGE` rows of ``authorizer_<table>`` whose id sorts after ``after``,
        in id order, each as a dict of its columns."""
        source = self._table(table)
        query = sa.select(source).where(source.c.id > after).order_by(source.c.id).limit(PAGE)
        with self.engine.connect() as conn:
            return [dict(row) for row in conn.execute(query).mappings()]

    def _table(self, table: str) -> sa.Table:
        name = PREFIX + table
        if name not in self._metadata.tables:
            sa.Table(name, self._metadata, autoload_with=self.engine)
        return self._metadata.tables[name]


@contextmanager
def open_source(database_type: str, database_url: str) -> Iterator[AuthorizerSource]:
    """Raises ValueError for flags that name no readable database."""
    engine = sa.create_engine(source_url(database_type, database_url), pool_pre_ping=True)
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        engine.dispose()
        raise ValueError(f"cannot open the Authorizer database: {exc.orig}") from None
    try:
        source = AuthorizerSource(engine)
        if not source.has("users"):
            raise ValueError("the database holds no authorizer_users table: is it Authorizer's?")
        yield source
    finally:
        engine.dispose()
