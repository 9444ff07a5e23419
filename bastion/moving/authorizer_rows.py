"""Authorizer's rows as bastion's: users as import records, webhooks, their logs, email
templates and authenticator apps as rows of bastion's tables (ids kept).

bastion's tables follow Authorizer's columns, so most fields carry over as they are. What
differs:

- a user Authorizer 2.4 deactivated (``is_active`` false) is revoked here;
- an authenticator's secret: Authorizer 2.3 seals it with AES-256-GCM under a key derived
  (HKDF-SHA256, info ``authorizer-aes-key``) from its ``--jwt-secret`` and writes
  ``enc:v1:`` + base64url(nonce || ciphertext); older rows hold the base32 secret in clear.
  bastion opens it with the key the operator gives and seals it with its own
  (:class:`~service.secretbox.SecretBox`, bound to the user id); recovery codes (a JSON map
  of code to "used") become digests of the unused ones.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bastion.core.auth import totp
from bastion.moving.writer import Authenticator
from bastion.service.secretbox import SecretBox

__all__ = [
    "audit_row",
    "authenticator_of",
    "authorizer_key",
    "log_row",
    "template_row",
    "user_record",
    "webhook_row",
]

_USER_FIELDS = (
    "id", "email", "email_verified_at", "signup_methods", "given_name", "family_name",
    "middle_name", "nickname", "gender", "birthdate", "phone_number",
    "phone_number_verified_at", "picture", "roles", "revoked_timestamp",
    "is_multi_factor_auth_enabled", "has_skipped_mfa_setup_at", "mfa_locked_at", "created_at",
    "updated_at",
)  # fmt: skip
_SEALED = "enc:v1:"
_NONCE = 12


def user_record(row: dict[str, Any]) -> dict[str, Any]:
    """An ``authorizer_users`` row as an import record (:mod:`bastion.moving.records`)."""
    record = {name: row[name] for name in _USER_FIELDS if row.get(name) not in (None, "")}
    if "is_multi_factor_auth_enabled" in record:  # SQLite's numeric, MySQL's 0/1
        record["is_multi_factor_auth_enabled"] = bool(record["is_multi_factor_auth_enabled"])
    if row.get("password"):
        record["password_hash"] = row["password"]
    if (
        row.get("is_active") is not None
        and not row["is_active"]
        and not row.get("revoked_timestamp")
    ):
        record["revoked_timestamp"] = row.get("updated_at") or row.get("created_at")
    app_data = _json(row.get("app_data"))
    if isinstance(app_data, dict) and app_data:
        record["app_data"] = app_data
    return record


def webhook_row(row: dict[str, Any]) -> dict[str, Any]:
    headers = _json(row.get("headers"))
    return {
        "id": row["id"],
        "event_name": row["event_name"],
        "event_description": row.get("event_description") or "",
        "end_point": row["end_point"],
        "headers": json.dumps(headers if isinstance(headers, dict) else {}),
        "enabled": bool(row["enabled"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def log_row(row: dict[str, Any]) -> dict[str, Any]:
    columns = ("id", "http_status", "response", "request", "webhook_id", "created_at", "updated_at")
    return {name: row.get(name) for name in columns}


def template_row(row: dict[str, Any]) -> dict[str, Any]:
    columns = ("id", "event_name", "subject", "template", "design", "created_at", "updated_at")
    return {name: row.get(name) for name in columns}


def audit_row(row: dict[str, Any]) -> dict[str, Any]:
    columns = (
        "id", "actor_id", "actor_type", "actor_email", "action", "resource_type", "resource_id",
        "ip_address", "user_agent", "metadata", "created_at",
    )  # fmt: skip
    return {name: row.get(name) for name in columns}


def authorizer_key(jwt_secret: str) -> AESGCM:
    """The key Authorizer 2.3 seals authenticator secrets with, from its ``--jwt-secret``."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"authorizer-aes-key")
    return AESGCM(derived.derive(jwt_secret.encode()))


def authenticator_of(
    row: dict[str, Any], *, key: AESGCM | None, box: SecretBox
) -> Authenticator | str:
    """The authenticator app of an ``authorizer_authenticators`` row sealed for bastion, or
    why it cannot be imported."""
    if row.get("method") != "totp":
        return f"method {row.get('method')!r} is not an authenticator app"
    secret = _open(row.get("secret") or "", key)
    if not isinstance(secret, bytes):
        return secret
    plain = secret.decode(errors="replace").strip().replace(" ", "").upper()
    try:
        base64.b32decode(plain + "=" * (-len(plain) % 8))
    except (binascii.Error, ValueError):
        return "its secret is not a base32 TOTP secret"
    codes = _json(row.get("recovery_codes"))
    unused = [code for code, used in codes.items() if not used] if isinstance(codes, dict) else []
    return Authenticator(
        id=row["id"],
        user_id=row["user_id"],
        sealed_secret=box.seal(plain, owner=row["user_id"]),
        recovery_digests=tuple(totp.recovery_digest(code) for code in unused),
        verified_at=row.get("verified_at"),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _open(stored: str, key: AESGCM | None) -> bytes | str:
    if not stored.startswith(_SEALED):
        return stored.encode()  # a secret from before Authorizer sealed them
    if key is None:
        return "its secret is sealed with Authorizer's --jwt-secret: give it as --from-jwt-secret"
    body = stored[len(_SEALED) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return key.decrypt(raw[:_NONCE], raw[_NONCE:], None)
    except (binascii.Error, ValueError, InvalidTag):
        return "its secret does not open with --from-jwt-secret (another key?)"


def _json(text: Any) -> Any:
    if not isinstance(text, str) or not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
