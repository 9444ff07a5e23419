"""An Authorizer 2.3 database made the way Authorizer makes it: the tables its GORM models
(``internal/storage/schemas`` of Authorizer 2.3.0) give under GORM's naming (prefix
``authorizer_``, fields in snake case) with GORM's column types on SQLite and PostgreSQL, and
rows as Authorizer writes them: bcrypt ``$2a$`` hashes at cost 10 (Go's bcrypt), roles and
sign-up methods comma-joined, ``app_data`` as JSON text, authenticator secrets sealed with
AES-256-GCM under a key derived from Authorizer's ``--jwt-secret``.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bcrypt
import pyotp
import sqlalchemy as sa
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from google.protobuf.struct_pb2 import Struct

from bastion.moving.openfga_wire import encode_model

#: (column, Go type, GORM tag) per model, as Authorizer 2.3.0 declares them.
MODELS: dict[str, list[tuple[str, str, str]]] = {
    "users": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("email", "*string", "index"), ("email_verified_at", "*int64", ""),
        ("password", "*string", ""), ("signup_methods", "string", ""),
        ("given_name", "*string", ""), ("family_name", "*string", ""),
        ("middle_name", "*string", ""), ("nickname", "*string", ""), ("gender", "*string", ""),
        ("birthdate", "*string", ""), ("phone_number", "*string", "index"),
        ("phone_number_verified_at", "*int64", ""), ("picture", "*string", ""),
        ("roles", "string", ""), ("revoked_timestamp", "*int64", ""),
        ("is_multi_factor_auth_enabled", "*bool", ""), ("updated_at", "int64", ""),
        ("created_at", "int64", ""), ("app_data", "*string", ""),
    ],
    "verification_requests": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("token", "string", ""),
        ("identifier", "string", "uniqueIndex:idx_email_identifier;type:varchar(64)"),
        ("expires_at", "int64", ""),
        ("email", "string", "uniqueIndex:idx_email_identifier;type:varchar(256)"),
        ("nonce", "string", ""), ("redirect_uri", "string", ""), ("created_at", "int64", ""),
        ("updated_at", "int64", ""),
    ],
    "sessions": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("user_id", "string", "type:char(36)"), ("user_agent", "string", ""),
        ("ip", "string", ""), ("created_at", "int64", ""), ("updated_at", "int64", ""),
    ],
    "webhooks": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("event_name", "string", "unique"), ("event_description", "string", ""),
        ("end_point", "string", ""), ("headers", "string", ""), ("enabled", "bool", ""),
        ("created_at", "int64", ""), ("updated_at", "int64", ""),
    ],
    "webhook_logs": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("http_status", "int64", ""), ("response", "string", ""), ("request", "string", ""),
        ("webhook_id", "string", "type:char(36)"), ("created_at", "int64", ""),
        ("updated_at", "int64", ""),
    ],
    "email_templates": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("event_name", "string", "unique"), ("subject", "string", ""),
        ("template", "string", ""), ("design", "string", ""), ("created_at", "int64", ""),
        ("updated_at", "int64", ""),
    ],
    "otps": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("email", "string", "index"), ("phone_number", "string", "index"),
        ("otp", "string", ""), ("expires_at", "int64", ""), ("created_at", "int64", ""),
        ("updated_at", "int64", ""),
    ],
    "authenticators": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("user_id", "string", "type:char(36)"), ("method", "string", ""),
        ("secret", "string", ""), ("recovery_codes", "*string", ""),
        ("verified_at", "*int64", ""), ("created_at", "int64", ""),
        ("updated_at", "int64", ""),
    ],
    "audit_logs": [
        ("key", "string", ""), ("id", "string", "primaryKey;type:char(36)"),
        ("actor_id", "string", "type:char(36)"), ("actor_type", "string", "type:varchar(30)"),
        ("actor_email", "string", "type:varchar(256)"),
        ("action", "string", "type:varchar(100)"),
        ("resource_type", "string", "type:varchar(50)"),
        ("resource_id", "string", "type:char(36)"),
        ("ip_address", "string", "type:varchar(45)"), ("user_agent", "string", "type:text"),
        ("metadata", "string", "type:text"), ("created_at", "int64", ""),
    ],
}  # fmt: skip

#: GORM's column type for a Go type, per dialect (its sqlite and postgres drivers).
_TYPES = {
    "sqlite": {"string": "text", "int64": "integer", "bool": "numeric"},
    "postgresql": {"string": "text", "int64": "bigint", "bool": "boolean"},
}


def ddl(dialect: str) -> list[str]:
    """The statements GORM's AutoMigrate runs for the models on an empty database."""
    q = "`" if dialect == "sqlite" else '"'
    statements = []
    for model, columns in MODELS.items():
        table = f"authorizer_{model}"
        parts, indexes, unique_groups = [], [], {}
        for name, go_type, tag in columns:
            options = dict([*item.split(":", 1), ""][:2] for item in tag.split(";") if item)
            column_type = options.get("type") or _TYPES[dialect][go_type.lstrip("*")]
            unique = " UNIQUE" if "unique" in options else ""
            parts.append(f"{q}{name}{q} {column_type}{unique}")
            if "index" in options:
                indexes.append(
                    f"CREATE INDEX {q}idx_{table}_{name}{q} ON {q}{table}{q}({q}{name}{q})"
                )
            if "uniqueIndex" in options:
                unique_groups.setdefault(options["uniqueIndex"], []).append(name)
        parts.append(f"PRIMARY KEY ({q}id{q})")
        statements.append(f"CREATE TABLE {q}{table}{q} ({','.join(parts)})")
        statements += indexes
        for index, names in unique_groups.items():
            cols = ",".join(f"{q}{n}{q}" for n in names)
            statements.append(f"CREATE UNIQUE INDEX {q}{index}{q} ON {q}{table}{q}({cols})")
    return statements


#: OpenFGA's own tables as its migrations leave them (openfga/openfga assets/migrations:
#: SQLite's 005-006, PostgreSQL's 001-006): what Authorizer's embedded engine creates in its
#: database when it keeps its store there.
OPENFGA_DDL = {
    "sqlite": [
        "CREATE TABLE tuple (store CHAR(26) NOT NULL, object_type VARCHAR(128) NOT NULL, "
        "object_id VARCHAR(128) NOT NULL, relation VARCHAR(50) NOT NULL, "
        "user_object_type VARCHAR(128) NOT NULL, user_object_id VARCHAR(128) NOT NULL, "
        "user_relation VARCHAR(50) NOT NULL, user_type VARCHAR(7) NOT NULL, "
        "ulid CHAR(26) NOT NULL, inserted_at TIMESTAMP NOT NULL, "
        "condition_name VARCHAR(256), condition_context LONGBLOB, PRIMARY KEY (store, "
        "object_type, object_id, relation, user_object_type, user_object_id, user_relation))",
        "CREATE UNIQUE INDEX idx_tuple_ulid ON tuple (ulid)",
        "CREATE TABLE authorization_model (store CHAR(26) NOT NULL, "
        "authorization_model_id CHAR(26) NOT NULL, schema_version VARCHAR(5) NOT NULL "
        "DEFAULT '1.1', serialized_protobuf LONGBLOB NOT NULL, "
        "PRIMARY KEY (store, authorization_model_id))",
        "CREATE TABLE store (id CHAR(26) PRIMARY KEY, name VARCHAR(64) NOT NULL, "
        "created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP, deleted_at TIMESTAMP)",
    ],
    "postgresql": [
        "CREATE TABLE tuple (store TEXT NOT NULL, object_type TEXT NOT NULL, "
        "object_id TEXT NOT NULL, relation TEXT NOT NULL, _user TEXT NOT NULL, "
        "user_type TEXT NOT NULL, ulid TEXT NOT NULL, inserted_at TIMESTAMPTZ NOT NULL, "
        "condition_name TEXT, condition_context BYTEA, "
        "PRIMARY KEY (store, object_type, object_id, relation, _user))",
        "CREATE UNIQUE INDEX idx_tuple_ulid ON tuple (ulid)",
        "CREATE TABLE authorization_model (store TEXT NOT NULL, "
        "authorization_model_id TEXT NOT NULL, type TEXT NOT NULL, type_definition BYTEA, "
        "schema_version TEXT NOT NULL DEFAULT '1.0', serialized_protobuf BYTEA, "
        "PRIMARY KEY (store, authorization_model_id, type))",
        "CREATE TABLE store (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
        "created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ, deleted_at TIMESTAMPTZ)",
    ],
}
#: The model Authorizer's engine holds (tests/moving/authorizer_fga_model.json: what
#: OpenFGA's CLI writes for it), with its ULID.
FGA_MODEL_ID = "01JB0000000000000000000000"
FGA_STORE_ID = "01JA0000000000000000000000"


def go_bcrypt(password: str) -> str:
    """What Go's ``bcrypt.GenerateFromPassword(password, 10)`` writes (``$2a$10$``)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(10, prefix=b"2a")).decode()


def seal_totp_secret(secret: str, jwt_secret: str) -> str:
    """Authorizer 2.3's ``crypto.EncryptTOTPSecret``: ``enc:v1:`` + base64url(nonce || sealed)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"authorizer-aes-key")
    nonce = os.urandom(12)
    sealed = AESGCM(key.derive(jwt_secret.encode())).encrypt(nonce, secret.encode(), None)
    return "enc:v1:" + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")


@dataclass
class AuthorizerDeployment:
    """The rows a test deployment holds, and what the test needs to know about them."""

    jwt_secret: str = "authorizer-jwt-secret-of-the-old-deployment"
    now: int = 1_700_000_000
    passwords: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    totp_secret: str = field(default_factory=pyotp.random_base32)
    recovery_codes: dict[str, bool] = field(
        default_factory=lambda: {"AAAAA-BBBBB": False, "CCCCC-DDDDD": True}
    )

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        def user(name: str, **extra: Any) -> dict[str, Any]:
            self.ids[name] = str(uuid.uuid4())
            self.passwords[name] = f"Old-{name}-pass-1"
            row = {column: None for column, _, _ in MODELS["users"]}
            row |= {
                "key": "", "id": self.ids[name], "email": f"{name}@example.com",
                "email_verified_at": self.now - 100, "password": go_bcrypt(self.passwords[name]),
                "signup_methods": "basic_auth", "given_name": name.title(),
                "family_name": "Moved", "roles": "user", "is_multi_factor_auth_enabled": False,
                "created_at": self.now - 1000, "updated_at": self.now - 100,
                "app_data": json.dumps({"plan": f"{name}-plan", "seats": 3}),
            }  # fmt: skip
            return {**row, **extra}

        users = [
            user("ada", roles="user,editor"),
            user("revoked", revoked_timestamp=self.now - 50),
            user("unverified", email_verified_at=None),
            user("totp", is_multi_factor_auth_enabled=True),
        ]
        webhook_id = str(uuid.uuid4())
        return {
            "users": users,
            "webhooks": [{
                "key": "", "id": webhook_id, "event_name": "user.login",
                "event_description": "user login", "end_point": "https://hooks.example.com/in",
                "headers": json.dumps({"x-team": "core"}), "enabled": True,
                "created_at": self.now - 500, "updated_at": self.now - 500,
            }],
            "webhook_logs": [{
                "key": "", "id": str(uuid.uuid4()), "http_status": 200, "response": "ok",
                "request": "{}", "webhook_id": webhook_id, "created_at": self.now - 400,
                "updated_at": self.now - 400,
            }],
            "email_templates": [{
                "key": "", "id": str(uuid.uuid4()), "event_name": "basic_auth_signup",
                "subject": "Welcome, {{.user.given_name}}", "template": "<p>hello</p>",
                "design": "", "created_at": self.now - 300, "updated_at": self.now - 300,
            }],
            "audit_logs": [{
                "key": "", "id": str(uuid.uuid4()), "actor_id": self.ids["ada"],
                "actor_type": "user", "actor_email": "ada@example.com",
                "action": "user.login_success", "resource_type": "user",
                "resource_id": self.ids["ada"], "ip_address": "10.0.0.1", "user_agent": "curl",
                "metadata": "{}", "created_at": self.now - 200,
            }],
            "authenticators": [{
                "key": "", "id": str(uuid.uuid4()), "user_id": self.ids["totp"],
                "method": "totp", "secret": seal_totp_secret(self.totp_secret, self.jwt_secret),
                "recovery_codes": json.dumps(self.recovery_codes),
                "verified_at": self.now - 90, "created_at": self.now - 95,
                "updated_at": self.now - 90,
            }],
            "verification_requests": [{
                "key": "", "id": str(uuid.uuid4()), "token": "a.b.c",
                "identifier": "basic_auth_signup", "expires_at": self.now + 3600,
                "email": "unverified@example.com", "nonce": "n", "redirect_uri": "",
                "created_at": self.now - 10, "updated_at": self.now - 10,
            }],
            "sessions": [{
                "key": "", "id": str(uuid.uuid4()), "user_id": self.ids["ada"],
                "user_agent": "curl", "ip": "10.0.0.1", "created_at": self.now - 5,
                "updated_at": self.now - 5,
            }],
            "otps": [],
        }  # fmt: skip


def fga_rows(deployment: AuthorizerDeployment, dialect: str) -> dict[str, list[dict[str, Any]]]:
    """OpenFGA's rows: one store, its model (protobuf), three tuples (one with a condition
    and its context as a ``google.protobuf.Struct``)."""
    model = json.loads((Path(__file__).with_name("authorizer_fga_model.json")).read_text())
    model["id"] = FGA_MODEL_ID
    context = Struct()
    context.update({"ip": "10.1.2.3"})
    at = datetime.fromtimestamp(deployment.now, UTC)
    ada = deployment.ids["ada"]
    tuples = [
        ("readme", "viewer", None, None), ("plan", "owner", None, None),
        ("intranet", "viewer", "in_office", context.SerializeToString()),
    ]  # fmt: skip
    rows = []
    for number, (doc, relation, condition, raw) in enumerate(tuples):
        row = {
            "store": FGA_STORE_ID, "object_type": "doc", "object_id": doc, "relation": relation,
            "user_type": "user", "ulid": f"01JC00000000000000000000{number:02d}",
            "inserted_at": at, "condition_name": condition, "condition_context": raw,
        }  # fmt: skip
        if dialect == "sqlite":
            row |= {"user_object_type": "user", "user_object_id": ada, "user_relation": ""}
        else:
            row["_user"] = f"user:{ada}"
        rows.append(row)
    model_row = {
        "store": FGA_STORE_ID, "authorization_model_id": FGA_MODEL_ID, "schema_version": "1.1",
        "serialized_protobuf": encode_model(model),
    }  # fmt: skip
    if dialect != "sqlite":
        model_row |= {"type": "", "type_definition": None}
    return {
        "store": [
            {
                "id": FGA_STORE_ID,
                "name": "Authorizer",
                "created_at": at,
                "updated_at": at,
                "deleted_at": None,
            }
        ],
        "authorization_model": [model_row],
        "tuple": rows,
    }


def build(url: str, deployment: AuthorizerDeployment, *, fga: bool = False) -> None:
    """Create Authorizer's tables at ``url`` (an empty SQLite file or PostgreSQL database)
    and write the deployment's rows; with ``fga``, its embedded OpenFGA's tables too."""
    engine = sa.create_engine(url)
    dialect = engine.dialect.name
    try:
        with engine.begin() as conn:
            for statement in ddl(dialect) + (OPENFGA_DDL[dialect] if fga else []):
                conn.exec_driver_sql(statement)
            metadata = sa.MetaData()
            metadata.reflect(conn)
            for model, rows in deployment.rows().items():
                if rows:
                    conn.execute(metadata.tables[f"authorizer_{model}"].insert(), rows)
            if fga:
                for table, rows in fga_rows(deployment, dialect).items():
                    conn.execute(metadata.tables[table].insert(), rows)
    finally:
        engine.dispose()
