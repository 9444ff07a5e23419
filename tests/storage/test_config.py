"""From startup flags to the SQLAlchemy URL, for every accepted spelling."""

from __future__ import annotations

import pytest

from bastion.storage import SUPPORTED_DATABASE_TYPES, StorageConfig
from bastion.storage.config import dialect_of, sqlalchemy_url


def url_of(**kwargs: object) -> str:
    config = StorageConfig(**kwargs)  # type: ignore[arg-type]
    return sqlalchemy_url(config).render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("database_type", "url", "expected"),
    [
        ("postgres", "postgres://u:p@db:5433/auth", "postgresql+psycopg://u:p@db:5433/auth"),
        ("postgresql", "postgresql://u@db/auth", "postgresql+psycopg://u@db/auth"),
        ("postgres", "postgresql+psycopg://u@db/auth", "postgresql+psycopg://u@db/auth"),
        ("postgres", "postgresql+asyncpg://u@db/auth", "postgresql+asyncpg://u@db/auth"),
        ("postgres", "postgres+ASYNCPG://u@db/auth", "postgresql+asyncpg://u@db/auth"),
        ("postgres", "postgresql+psycopg2://u@db/auth", "postgresql+psycopg://u@db/auth"),
        ("mysql", "mysql+asyncpg://u@db/auth", "mysql+pymysql://u@db/auth?charset=utf8mb4"),
        ("mysql", "mysql://u:p@db/auth", "mysql+pymysql://u:p@db/auth?charset=utf8mb4"),
        ("mariadb", "mariadb://u@db:3307/auth", "mysql+pymysql://u@db:3307/auth?charset=utf8mb4"),
        ("mariadb", "mysql://u@db/a?charset=latin1", "mysql+pymysql://u@db/a?charset=latin1"),
        ("sqlite", "./bastion.db", "sqlite+pysqlite:///./bastion.db"),
        ("sqlite", "/var/lib/bastion.db", "sqlite+pysqlite:////var/lib/bastion.db"),
        ("sqlite", "sqlite:///data/b.db", "sqlite+pysqlite:///data/b.db"),
        ("sqlite", "sqlite:////abs/b.db", "sqlite+pysqlite:////abs/b.db"),
    ],
)
def test_urls(database_type: str, url: str, expected: str) -> None:
    assert url_of(database_type=database_type, database_url=url) == expected


def test_password_with_reserved_characters_survives() -> None:
    url = url_of(database_type="postgres", database_url="postgres://u:p%40ss%2Fw@db/auth")
    assert url == "postgresql+psycopg://u:p%40ss%2Fw@db/auth"


def test_url_from_parts() -> None:
    parts = {
        "database_host": "db.internal",
        "database_name": "auth",
        "database_username": "svc",
        "database_password": "p@ss/word",
    }
    assert (
        url_of(database_type="postgres", **parts)
        == "postgresql+psycopg://svc:p%40ss%2Fword@db.internal:5432/auth"
    )
    assert (
        url_of(database_type="mariadb", database_port=3307, **parts)
        == "mysql+pymysql://svc:p%40ss%2Fword@db.internal:3307/auth?charset=utf8mb4"
    )
    assert url_of(database_type="sqlite", database_name="x.db") == "sqlite+pysqlite:///x.db"


def test_url_wins_over_parts() -> None:
    url = url_of(database_type="postgres", database_url="postgres://a@h1/d1", database_host="h2")
    assert url == "postgresql+psycopg://a@h1/d1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"database_type": "mongodb"}, "unsupported database type"),
        ({"database_type": "postgres", "database_port": 70000}, "port"),
        ({"database_type": "postgres"}, "host and name"),
        ({"database_type": "postgres", "database_url": "mysql://u@h/d"}, "is for mysql"),
        ({"database_type": "mysql", "database_url": "db.example.com/x"}, "no scheme"),
        ({"database_type": "postgres", "database_url": "oracle://u@h/d"}, "scheme"),
    ],
)
def test_bad_configs_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        url_of(**kwargs)


def test_supported_types_and_dialects() -> None:
    assert {"sqlite", "postgres", "postgresql", "mysql", "mariadb"} == SUPPORTED_DATABASE_TYPES
    assert dialect_of(StorageConfig(database_type="mariadb")) == "mysql"
    assert dialect_of(StorageConfig(database_type="postgres")) == "postgresql"
