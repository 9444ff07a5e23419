"""Every text field's maximum length, in characters: one table for every surface.

A request field is looked up by its wire name. The request validation of REST, GraphQL
and gRPC refuses a longer value with 400 ``invalid_argument`` naming the field and the
limit (before any service code runs, so SQLite, PostgreSQL and MariaDB answer alike), the
OpenAPI document shows each limit as ``maxLength``, and the storage schema sizes its
columns from the same entries. A list of strings limits each item; a JSON object
(``app_data``, ``headers``) limits its JSON text.

Limits of values kept in a ``TEXT`` column stay below 16,383 characters, what MariaDB's
``TEXT`` (65,535 bytes) holds of four-byte UTF-8 characters.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["TEXT_LIMITS", "too_long"]

_NAME = 256
_ID = 256
_URL = 4096
_TOKEN = 16384
_SECRET = 1024
_FGA_OBJECT = 512

TEXT_LIMITS: Mapping[str, int] = MappingProxyType(
    {
        # identities and profile (``users`` columns)
        "email": 256,
        "emails": 256,
        "phone_number": 64,
        "given_name": _NAME,
        "family_name": _NAME,
        "middle_name": _NAME,
        "nickname": _NAME,
        "gender": 64,
        "birthdate": 64,
        "picture": _URL,
        "roles": _NAME,
        "scope": _NAME,
        "app_data": 16000,
        # secrets and proofs
        "password": _SECRET,
        "confirm_password": _SECRET,
        "old_password": _SECRET,
        "new_password": _SECRET,
        "confirm_new_password": _SECRET,
        "admin_secret": _SECRET,
        "otp": 256,
        "token": _TOKEN,
        "refresh_token": _TOKEN,
        "cookie": _TOKEN,
        "token_type": 64,
        "identifier": 64,
        # links and flow state
        "redirect_uri": _URL,
        "state": _URL,
        # lookups and filters
        "id": _ID,
        "user_id": _ID,
        "webhook_id": _ID,
        "actor_id": _ID,
        "resource": _ID,
        "resource_id": _ID,
        "resource_type": _ID,
        "action": _ID,
        "query": _NAME,
        # webhooks and email templates
        "event_name": _NAME,
        "event_description": _URL,
        "endpoint": _URL,
        "headers": 8192,
        "subject": 1024,
        "template": 16000,
        "design": 16000,
        # fine-grained authorization (``fga_tuples`` columns)
        "user": _FGA_OBJECT,
        "object": _FGA_OBJECT,
        "relation": 50,
        "object_type": 254,
        "user_type": 254,
        "condition_name": 256,
        "continuation_token": _URL,
        "dsl": 16000,
        # passkeys: a PublicKeyCredential as JSON; a passkey's label
        "credential": 65536,
        "name": _NAME,
    }
)


def too_long(name: str, length: int) -> str | None:
    """Why a value of ``length`` characters may not fill field ``name``, or None."""
    limit = TEXT_LIMITS.get(name)
    if limit is not None and length > limit:
        return f"{name} is longer than the limit of {limit} characters"
    return None
