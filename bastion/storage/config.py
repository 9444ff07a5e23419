"""What the storage layer needs to know to connect: built from the server's startup flags.

``database_url`` wins over the individual parts. Accepted URLs: ``postgres://``,
``postgresql://``, ``mysql://``, ``mariadb://``, ``sqlite:///path`` and a bare SQLite file
path such as ``./bastion.db``. A ``+driver`` suffix is replaced by the driver bastion uses,
except that PostgreSQL lets it choose between psycopg (the default: sync, in worker
threads) and asyncpg (``postgresql+asyncpg://``, under trio-asyncio); ``bench/auth.py``
measures both.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import URL, make_url

__all__ = [
    "SUPPORTED_DATABASE_TYPES",
    "StorageConfig",
    "dialect_of",
    "sqlalchemy_url",
]

#: ``--database-type`` values and the dialect each one means.
_DIALECTS = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}
SUPPORTED_DATABASE_TYPES: frozenset[str] = frozenset(_DIALECTS)

#: The driver bastion uses for each dialect.
_DRIVERS = {
    "sqlite": "sqlite+pysqlite",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
}
#: Drivers a URL may name instead of the default one.
_CHOOSABLE_DRIVERS = {"postgresql": frozenset({"psycopg", "asyncpg"})}
_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}
_URL_SCHEMES = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}


@dataclass(frozen=True)
class StorageConfig:
    database_type: str = "sqlite"
    database_url: str = ""
    database_host: str = ""
    database_port: int = 0  #: 0 = the database's default port
    database_name: str = ""
    database_username: str = ""
    database_password: str = ""
    database_cert: str = ""  #: client certificate file (TLS)
    database_ca_cert: str = ""  #: CA certificate file that signs the server's certificate
    database_cert_key: str = ""  #: private key file of ``database_cert``
    #: "" = the SQL-backed store in the main database; "memory://" = this process only;
    #: "redis://..." / "rediss://..." = Redis.
    memory_store_url: str = ""
    run_migrations: bool = True
    #: Without migrations: refuse (SchemaMismatch) a schema behind this build.
    check_schema: bool = False
    #: Connections (and worker threads) per process for the database and for Redis.
    pool_size: int = 10
    #: Seconds to wait for a connection, a lock or an answer before giving up.
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.database_type not in SUPPORTED_DATABASE_TYPES:
            raise ValueError(
                f"unsupported database type {self.database_type!r}; "
                f"expected one of {', '.join(sorted(SUPPORTED_DATABASE_TYPES))}"
            )
        if not 0 <= self.database_port <= 65535:
            raise ValueError(f"database port out of range: {self.database_port}")
        if self.pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")


def dialect_of(config: StorageConfig) -> str:
    """``sqlite``, ``postgresql`` or ``mysql`` (MySQL and MariaDB share one dialect)."""
    return _DIALECTS[config.database_type]


def sqlalchemy_url(config: StorageConfig) -> URL:
    """The SQLAlchemy URL, with bastion's driver, for ``config``."""
    dialect = dialect_of(config)
    if config.database_url:
        url = _parse_url(config.database_url, dialect)
    elif dialect == "sqlite":
        url = URL.create(_DRIVERS["sqlite"], database=config.database_name or "bastion.db")
    else:
        if not config.database_host or not config.database_name:
            raise ValueError("a database URL, or a database host and name, is required")
        url = URL.create(
            _DRIVERS[dialect],
            username=config.database_username or None,
            password=config.database_password or None,
            host=config.database_host,
            port=config.database_port or _DEFAULT_PORTS[dialect],
            database=config.database_name,
        )
    url_dialect = url.get_backend_name()
    if url_dialect != dialect:
        raise ValueError(
            f"database URL is for {url_dialect} but the database type is {config.database_type}"
        )
    if dialect == "mysql" and "charset" not in url.query:
        url = url.update_query_dict({"charset": "utf8mb4"})
    return url


def _parse_url(raw: str, dialect: str) -> URL:
    scheme, sep, _ = raw.partition("://")
    if not sep:
        if dialect != "sqlite":
            raise ValueError("the database URL has no scheme (postgresql://, mysql://, ...)")
        return URL.create(_DRIVERS["sqlite"], database=raw)
    name, _, driver = scheme.lower().partition("+")
    base = _URL_SCHEMES.get(name)
    if base is None:
        raise ValueError(f"unsupported database URL scheme {scheme!r}")
    chosen = _DRIVERS[base]
    if driver in _CHOOSABLE_DRIVERS.get(base, ()):
        chosen = f"{base}+{driver}"
    rest = raw[len(scheme) :]
    if base == "postgresql":
        rest = _multi_host(rest)
    # make_url keeps escaping of the user, password and query intact.
    return make_url(chosen + rest)


def _multi_host(rest: str) -> str:
    """libpq's multi-host form (``//user@h1:p1,h2:p2/db?target_session_attrs=...``) as
    SQLAlchemy takes it: no host in the authority, one ``host=h:p`` query item each."""
    authority, _, tail = rest[3:].partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if "," not in hosts:
        return rest
    path, _, query = tail.partition("?")
    items = "&".join(f"host={h}" for h in hosts.split(",") if h)
    query = f"{query}&{items}" if query else items
    return f"://{userinfo}{at}/{path}?{query}"
