"""The words the flag table is written in: groups, kinds, the database and JWT types,
the flags bastion names but does not take, and how a field declares its flag."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

#: Exit status of a command whose configuration is refused (a flag, or a schema this build
#: must not run on).
EXIT_CONFIG: Final = 2


class ConfigError(Exception):
    """A startup configuration the server refuses; ``message`` is one line for stderr."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Group(enum.Enum):
    """Sections of ``--help``, in the order they are shown."""

    SERVER = "server"
    DATABASE = "database"
    CREDENTIALS = "credentials"
    TOKENS = "tokens"
    SECURITY = "security"
    SIGNUP_LOGIN = "sign-up and login"
    MFA = "multi-factor authentication"
    EMAIL = "email"
    SMS = "sms"
    SOCIAL = "social login"
    AUTHORIZATION = "roles and authorization"
    GRAPHQL = "graphql"
    PAGES = "pages and branding"
    WEBHOOKS = "webhooks"
    RETENTION = "retention"


class Kind(enum.Enum):
    """How a flag's text becomes a value."""

    #: ``--flag`` (true) or ``--flag=true|false``.
    BOOL = "bool"
    #: A decimal integer.
    INT = "int"
    #: A decimal number (rates).
    FLOAT = "float"
    #: Free text, kept as given.
    TEXT = "text"
    #: Comma-separated; items are stripped and empty items dropped.
    LIST = "list"
    #: PEM text; a value written on one line with literal ``\n`` escapes is unescaped.
    PEM = "pem"


#: Features that have not landed yet: giving one of these flags, with any value, stops
#: the server at startup ("... not implemented in this build"). Each later issue removes
#: the flags of the feature it implements, in the same change that implements it.
NOT_IMPLEMENTED_FLAGS: Final[frozenset[str]] = frozenset(
    {
        # server
        "grpc-insecure",
    }
)

#: Names that are refused with a pointer to what replaced them (None: no replacement).
RENAMED_FLAGS: Final[Mapping[str, str | None]] = {
    # v1-style names (spec: "not accepted")
    "database_url": "database-url",
    "database_type": "database-type",
    "env_file": None,
    "log_level": "log-level",
    "redis_url": "memory-store-url",
    # Authorizer 2.3 names that bastion spells differently
    "redis-url": "memory-store-url",
    "twilio-account-sid": "sms-account-sid",
    "twilio-api-key": "sms-api-key",
    "twilio-api-secret": "sms-api-secret",
    "twilio-sender": "sms-sender",
    "smtp-skip-tls-verification": "skip-tls-verification",
}

#: Flags of the document/cloud NoSQL backends, which bastion does not support.
NOSQL_ONLY_FLAGS: Final[frozenset[str]] = frozenset(
    {
        "couchbase-bucket",
        "couchbase-ram-quota",
        "couchbase-scope",
        "aws-region",
        "aws-access-key-id",
        "aws-secret-access-key",
    }
)

#: Accepted ``--database-type`` values and the SQL dialect each one means.
DATABASE_TYPES: Final[Mapping[str, str]] = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}

#: Database types Authorizer knows that bastion refuses (all NoSQL, plus libsql).
NOSQL_DATABASE_TYPES: Final[frozenset[str]] = frozenset(
    {"mongodb", "arangodb", "cassandradb", "scylladb", "couchbase", "dynamodb"}
)

#: URL schemes (before any ``+driver``) per dialect.
DIALECT_SCHEMES: Final[Mapping[str, str]] = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}

JWT_TYPES: Final[tuple[str, ...]] = (
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "ES256",
    "ES384",
    "ES512",
)

LOG_LEVELS: Final[Mapping[str, int]] = {"debug": 10, "info": 20, "warn": 30, "error": 40}

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class FlagMeta:
    group: Group
    doc: str
    choices: tuple[str, ...]
    pem: bool
    shown_default: str | None


def flag_field(
    default: _T,
    group: Group,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    pem: bool = False,
    shown_default: str | None = None,
) -> _T:
    meta = FlagMeta(group, doc, choices, pem, shown_default)
    return field(default=default, metadata={"flag": meta})


REQUIRED_SHOWN = "required"
NONE_SHOWN = "none"
