"""bastion's SQL schema: one definition for SQLite, PostgreSQL and MySQL/MariaDB.

Tables follow Authorizer 2.3's data model under the ``service_`` prefix. Identifiers are
UUID strings; timestamps are integer Unix seconds. ``email`` and ``phone_number`` of
``service_users`` and ``service_otps`` are plain, non-unique indexes: uniqueness is the
application's job (``Database.run_locked``), see the spec's Versioning 5.

``service_memory`` backs the default memory store (sessions, challenges, counters).
The migrations in ``migrations/versions`` create exactly this schema; a test compares them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from bastion.core.limits import TEXT_LIMITS

__all__ = [
    "DEFAULT_FGA_STORE",
    "IDENTITY_COLUMNS",
    "audit_logs",
    "authenticators",
    "email_templates",
    "fga_assertions",
    "fga_changelog",
    "fga_models",
    "fga_stores",
    "fga_tuples",
    "memory",
    "metadata",
    "otps",
    "outbox",
    "passkeys",
    "sessions",
    "users",
    "verification_requests",
    "webhook_logs",
    "webhooks",
]

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    }
)

#: Table options for MySQL/MariaDB; ignored elsewhere.
_MYSQL: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}

#: Tables whose identity columns must never carry a unique index (spec Versioning 5).
IDENTITY_COLUMNS: dict[str, tuple[str, ...]] = {
    "service_users": ("email", "phone_number"),
    "service_otps": ("email", "phone_number"),
}


def _declared(field: str) -> sa.String:
    """A column holding request field ``field``: as long as its declared limit."""
    return sa.String(TEXT_LIMITS[field])


def _id() -> sa.Column[str]:
    return sa.Column("id", sa.String(36), primary_key=True)


def _timestamps() -> tuple[sa.Column[int], sa.Column[int]]:
    return (
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
    )


users = sa.Table(
    "service_users",
    metadata,
    _id(),
    sa.Column("email", _declared("email"), index=True),
    sa.Column("email_verified_at", sa.BigInteger),
    sa.Column("password", sa.String(256)),
    sa.Column("signup_methods", sa.String(512), nullable=False, server_default=""),
    sa.Column("given_name", _declared("given_name")),
    sa.Column("family_name", _declared("family_name")),
    sa.Column("middle_name", _declared("middle_name")),
    sa.Column("nickname", _declared("nickname")),
    sa.Column("gender", _declared("gender")),
    sa.Column("birthdate", _declared("birthdate")),
    sa.Column("phone_number", _declared("phone_number"), index=True),
    sa.Column("phone_number_verified_at", sa.BigInteger),
    sa.Column("picture", sa.Text),
    sa.Column("roles", sa.Text, nullable=False),
    sa.Column("revoked_timestamp", sa.BigInteger),
    sa.Column("is_multi_factor_auth_enabled", sa.Boolean),
    sa.Column("app_data", sa.Text),
    *_timestamps(),
    #: tokens issued before this time are refused (migration 0004; bastion/storage/users.py)
    sa.Column("sessions_valid_after", sa.BigInteger),
    #: MFA enrolment (migration 0008; bastion/core/state_machines/mfa_setup.py)
    sa.Column("enrolled_mfa_methods", sa.String(64), nullable=False, server_default=""),
    sa.Column("has_skipped_mfa_setup_at", sa.BigInteger),
    sa.Column("mfa_locked_at", sa.BigInteger),
    **_MYSQL,
)

verification_requests = sa.Table(
    "service_verification_requests",
    metadata,
    _id(),
    sa.Column("token", sa.Text, nullable=False),
    sa.Column("identifier", sa.String(64), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False, index=True),
    sa.Column("email", sa.String(256), nullable=False),
    sa.Column("nonce", sa.String(256), nullable=False),
    sa.Column("redirect_uri", sa.Text),
    *_timestamps(),
    sa.UniqueConstraint("email", "identifier"),
    **_MYSQL,
)

sessions = sa.Table(
    "service_sessions",
    metadata,
    _id(),
    sa.Column("user_id", sa.String(36), nullable=False, index=True),
    sa.Column("user_agent", sa.Text),
    sa.Column("ip", sa.String(64)),
    *_timestamps(),
    **_MYSQL,
)

otps = sa.Table(
    "service_otps",
    metadata,
    _id(),
    sa.Column("email", _declared("email"), index=True),
    sa.Column("phone_number", _declared("phone_number"), index=True),
    sa.Column("otp", _declared("otp"), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    *_timestamps(),
    **_MYSQL,
)

authenticators = sa.Table(
    "service_authenticators",
    metadata,
    _id(),
    sa.Column("user_id", sa.String(36), nullable=False, index=True),
    sa.Column("method", sa.String(32), nullable=False),
    sa.Column("secret", sa.Text),
    sa.Column("recovery_codes", sa.Text),
    sa.Column("verified_at", sa.BigInteger),
    #: the last TOTP time step a code was accepted for: replay protection (migration 0006)
    sa.Column("last_used_step", sa.BigInteger),
    *_timestamps(),
    **_MYSQL,
)

#: WebAuthn credentials (issue 22, migration 0009). ``credential_id`` (base64url of the
#: authenticator's id) is unique across all users: the database settles concurrent
#: registrations of one authenticator.
passkeys = sa.Table(
    "service_passkeys",
    metadata,
    _id(),
    sa.Column("user_id", sa.String(36), nullable=False, index=True),
    sa.Column("credential_id", sa.String(255), nullable=False, unique=True),
    sa.Column("public_key", sa.LargeBinary, nullable=False),
    sa.Column("sign_count", sa.BigInteger, nullable=False),
    sa.Column("transports", sa.String(255), nullable=False),
    sa.Column("name", _declared("name"), nullable=False),
    sa.Column("backup_eligible", sa.Boolean, nullable=False),
    sa.Column("backed_up", sa.Boolean, nullable=False),
    sa.Column("last_used_at", sa.BigInteger),
    *_timestamps(),
    **_MYSQL,
)

webhooks = sa.Table(
    "service_webhooks",
    metadata,
    _id(),
    #: As registered; several webhooks may share an event (migration 0004).
    sa.Column("event_name", sa.String(256), nullable=False, index=True),
    sa.Column("event_description", sa.Text),
    sa.Column("end_point", sa.Text, nullable=False),
    sa.Column("headers", sa.Text),
    sa.Column("enabled", sa.Boolean, nullable=False),
    *_timestamps(),
    **_MYSQL,
)

webhook_logs = sa.Table(
    "service_webhook_logs",
    metadata,
    _id(),
    sa.Column("http_status", sa.BigInteger),
    sa.Column("response", sa.Text),
    sa.Column("request", sa.Text),
    sa.Column("webhook_id", sa.String(36), nullable=False, index=True),
    *_timestamps(),
    #: the retention prune reads the oldest first (migration 0011)
    sa.Index("ix_service_webhook_logs_created_at", "created_at"),
    **_MYSQL,
)

email_templates = sa.Table(
    "service_email_templates",
    metadata,
    _id(),
    sa.Column("event_name", sa.String(256), nullable=False, unique=True),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("template", sa.Text, nullable=False),
    sa.Column("design", sa.Text),
    *_timestamps(),
    **_MYSQL,
)

audit_logs = sa.Table(
    "service_audit_logs",
    metadata,
    _id(),
    sa.Column("actor_id", sa.String(256)),
    sa.Column("actor_type", sa.String(30)),
    sa.Column("actor_email", sa.String(256)),
    sa.Column("action", sa.String(100), nullable=False, index=True),
    sa.Column("resource_type", sa.String(50)),
    sa.Column("resource_id", sa.String(256)),
    sa.Column("ip_address", sa.String(45)),
    sa.Column("user_agent", sa.Text),
    sa.Column("metadata", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False, index=True),
    **_MYSQL,
)

#: Keys compare byte for byte on every database (MySQL's default collation ignores case).
_MEMORY_KEY = sa.String(255).with_variant(
    mysql.VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
)

memory = sa.Table(
    "service_memory",
    metadata,
    sa.Column("key", _MEMORY_KEY, primary_key=True),
    sa.Column("value", sa.LargeBinary().with_variant(mysql.MEDIUMBLOB(), "mysql", "mariadb")),
    #: Unix seconds (fractional); NULL = never expires.
    sa.Column("expires_at", sa.Double, index=True),
    **_MYSQL,
)

outbox = sa.Table(
    "service_outbox",
    metadata,
    _id(),
    sa.Column("kind", sa.String(32), nullable=False),
    #: JSON: what the handler for ``kind`` needs, and nothing secret beyond it.
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    #: Unix seconds (fractional); NULL once the item has failed for good.
    sa.Column("next_attempt_at", sa.Double, index=True),
    #: A worker's claim on the item; another worker takes it over once it lapses.
    sa.Column("leased_until", sa.Double),
    sa.Column("last_error", sa.Text),
    sa.Column("failed_at", sa.BigInteger),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    **_MYSQL,
)

# ---------------------------------------------------------------- authorization engine (FGA)


def _fga_text(field: str) -> sa.String:
    """Tuple parts compare byte for byte on every database (MySQL's default ignores case);
    as long as request field ``field``'s declared limit."""
    length = TEXT_LIMITS[field]
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def _tuple_text(field: str, length: int = 0) -> sa.String:
    """A tuple's part, and on PostgreSQL in the "C" collation (migration 0014): equality
    is byte for byte in any deterministic collation, but a B-tree over "C" compares with
    ``memcmp`` where the database's locale calls ``strcoll``: an import's index builds
    sort faster (bench/RESULTS.md)."""
    length = length or TEXT_LIMITS[field]
    base = _fga_text(field) if field else sa.String(length)
    return base.with_variant(postgresql.VARCHAR(length, collation="C"), "postgresql")


#: The store the Authorizer-shaped API (``/v1/..._fga_*``, check_permissions) uses; created
#: by migration 0010, never deleted. A ULID, as every OpenFGA store id.
DEFAULT_FGA_STORE = "00000000000000000000000000"


def _store_id() -> sa.Column[str]:
    return sa.Column("store_id", sa.String(26), nullable=False, server_default=DEFAULT_FGA_STORE)


#: Authorization stores (OpenFGA's ``/stores``): each holds its own models, tuples and
#: changelog, isolated from the others.
fga_stores = sa.Table(
    "service_fga_stores",
    metadata,
    sa.Column("id", sa.String(26), primary_key=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    **_MYSQL,
)

#: OpenFGA's assertions of one model version (``/stores/{id}/assertions/{model}``), as JSON.
fga_assertions = sa.Table(
    "service_fga_assertions",
    metadata,
    sa.Column("store_id", sa.String(26), primary_key=True),
    sa.Column("model_id", sa.String(36), primary_key=True),
    sa.Column("assertions", sa.Text, nullable=False),
    **_MYSQL,
)

#: Authorization model versions, append-only; the one with the highest ``revision`` is current.
fga_models = sa.Table(
    "service_fga_models",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    _store_id(),
    sa.Column("dsl", sa.Text, nullable=False),
    #: The store revision that installed this version (see ``service_fga_changelog``).
    sa.Column("revision", sa.BigInteger, nullable=False, index=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    **_MYSQL,
)

#: Relationship tuples. ``key_hash`` (SHA-256 of ``object#relation@user``) keeps them unique
#: without an index longer than MySQL allows; (object, relation) serves forward reads and
#: (user, object_type) reverse reads. ``id`` orders pages of Read. On PostgreSQL the table
#: is partitioned by store (migration 0014, storage/fga_partitions.py) and its primary key
#: is ``(store_id, id)``: a partitioned table's unique keys hold the partition key.
fga_tuples = sa.Table(
    "service_fga_tuples",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    _store_id(),
    sa.Column("key_hash", _tuple_text("", 64), nullable=False),
    sa.Column("object_type", _tuple_text("object_type"), nullable=False),
    sa.Column("object", _tuple_text("object"), nullable=False),
    sa.Column("relation", _tuple_text("relation"), nullable=False),
    sa.Column("user", _tuple_text("user"), nullable=False),
    sa.Column("condition_name", _declared("condition_name")),
    #: JSON object: the condition's stored context.
    sa.Column("condition_context", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Index("ix_service_fga_tuples_object_relation", "object", "relation"),
    sa.Index("ix_service_fga_tuples_user_object_type", "user", "object_type"),
    #: The userset tuples alone (partial where the database can): the engine's
    #: read_usersets (storage/fga_reads.py) carries the same predicate.
    sa.Index(
        "ix_service_fga_tuples_usersets",
        "store_id",
        "object",
        "relation",
        postgresql_where=sa.text("\"user\" LIKE '%#%'"),
        sqlite_where=sa.text("\"user\" LIKE '%#%'"),
    ),
    #: On PostgreSQL ``(key_hash, store_id)``: led by the column that tells a store's rows
    #: apart (migration 0014).
    sa.UniqueConstraint("store_id", "key_hash", name="uq_service_fga_tuples_store_key"),
    postgresql_partition_by="LIST (store_id)",
    **_MYSQL,
)

#: Every change to a store, numbered per store: the store's revision is the highest ``revision``.
#: Server processes keep an in-memory index and replay the rows past the revision they saw.
fga_changelog = sa.Table(
    "service_fga_changelog",
    metadata,
    sa.Column(
        "store_id",
        sa.String(26),
        primary_key=True,
        nullable=False,
        server_default=DEFAULT_FGA_STORE,
    ),
    sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
    #: ``write`` / ``delete`` (a tuple), ``model`` (``object`` holds the model id), ``reset``.
    sa.Column("operation", sa.String(16), nullable=False),
    sa.Column("object", _fga_text("object"), nullable=False, server_default=""),
    sa.Column("relation", _fga_text("relation"), nullable=False, server_default=""),
    sa.Column("user", _fga_text("user"), nullable=False, server_default=""),
    sa.Column("condition_name", _declared("condition_name")),
    sa.Column("condition_context", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    **_MYSQL,
)
