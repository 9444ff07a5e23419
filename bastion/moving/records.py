"""A user as one JSON object: what ``bastion import users`` reads, line by line, and
``bastion export users`` writes. The fields are the user's stored fields under their API
names (README "Importing users"); an export imports back unchanged.

Every value is checked before anything is written: a record that fails names the field and
why, never quoting a password hash.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bastion.core.auth.user import (
    User,
    has_control_character,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.core.input_rules import refusal
from bastion.core.limits import TEXT_LIMITS
from bastion.service.hash_formats import UnusableHash, firebase_scrypt_hash, parse_hash

__all__ = [
    "FirebaseParameters",
    "ImportedUser",
    "RecordProblem",
    "RecordRules",
    "record_of",
    "user_of",
]

TEXT_FIELDS = (
    "email", "phone_number", "given_name", "family_name", "middle_name", "nickname", "gender",
    "birthdate", "picture",
)  # fmt: skip
TIME_FIELDS = (
    "email_verified_at", "phone_number_verified_at", "revoked_timestamp", "created_at",
    "updated_at", "has_skipped_mfa_setup_at", "mfa_locked_at",
)  # fmt: skip
LIST_FIELDS = ("roles", "signup_methods", "enrolled_mfa_methods")
#: second factors an import can carry: an authenticator app's secret is not in a record
IMPORTABLE_MFA_METHODS = ("email_otp", "sms_otp")
KNOWN_FIELDS = frozenset(
    {"id", "password_hash", "password_salt", "app_data", "is_multi_factor_auth_enabled",
     "email_verified", "phone_number_verified", *TEXT_FIELDS, *TIME_FIELDS, *LIST_FIELDS}
)  # fmt: skip
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,36}")
_LIST_ITEM = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
#: 9999-12-31: a timestamp past it is a unit mistake (milliseconds), not a date
_LATEST = 253402300799


class RecordProblem(ValueError):
    """A record that cannot be imported: the message names the field."""


class FirebaseParameters:
    """A Firebase project's password hash parameters (``firebase auth:export`` leaves them
    out; the console shows them): records carrying ``password_salt`` are Firebase hashes."""

    def __init__(self, *, signer_key: str, salt_separator: str, rounds: int, mem_cost: int):
        self.signer_key, self.salt_separator = signer_key, salt_separator
        self.rounds, self.mem_cost = rounds, mem_cost

    def stored(self, password_hash: str, salt: str) -> str:
        return firebase_scrypt_hash(
            password_hash=password_hash, salt=salt, signer_key=self.signer_key,
            salt_separator=self.salt_separator, rounds=self.rounds, mem_cost=self.mem_cost,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a record is read against: the time, the server's roles, Firebase's parameters."""

    now: int
    #: roles of a record that names none (the server's ``--default-roles``)
    default_roles: tuple[str, ...] = ("user",)
    #: the roles a user may hold (the server's ``--roles``); empty: not checked
    allowed_roles: tuple[str, ...] = ()
    firebase: FirebaseParameters | None = None


@dataclass(frozen=True, slots=True)
class ImportedUser:
    """A user read from a record, and what the record said of its identity and age."""

    user: User
    #: the record named the id (else: a new one, or the account already holding the address)
    id_given: bool
    #: the record gave ``updated_at`` (else it never updates an account already there)
    dated: bool


def user_of(record: Any, rules: RecordRules) -> ImportedUser:
    """The user a record describes; raises :class:`RecordProblem`."""
    if not isinstance(record, Mapping):
        raise RecordProblem("a record must be a JSON object")
    problem = refusal(record, "record")
    if problem is not None:
        raise RecordProblem(problem)
    unknown = sorted(set(record) - KNOWN_FIELDS)
    if unknown:
        raise RecordProblem(f"unknown field {unknown[0]!r}")
    texts = {name: _text(record, name) for name in TEXT_FIELDS}
    times = {name: _time(record, name) for name in TIME_FIELDS}
    email, phone = texts["email"], texts["phone_number"]
    if email is not None:
        if not is_valid_email(email):
            raise RecordProblem("email is not a valid address")
        texts["email"] = normalise_email(email)
    if phone is not None and not is_valid_phone_number(phone):
        raise RecordProblem("phone_number is not a valid phone number")
    if email is None and phone is None:
        raise RecordProblem("a user needs an email or a phone_number")
    created = times["created_at"] or rules.now
    for flag, stamp in (("email_verified", "email_verified_at"),
                        ("phone_number_verified", "phone_number_verified_at")):  # fmt: skip
        if _bool(record, flag) and times[stamp] is None:
            times[stamp] = created
    password_hash = _password(record, rules.firebase)
    roles = _list(record, "roles") or rules.default_roles
    stray = [role for role in roles if rules.allowed_roles and role not in rules.allowed_roles]
    if stray:
        raise RecordProblem(f"roles holds {stray[0]!r}, which is not one of the server's --roles")
    signup_methods = _list(record, "signup_methods")
    if not signup_methods and password_hash:
        signup_methods = ("basic_auth",) if email is not None else ("mobile_basic_auth",)
    methods = _list(record, "enrolled_mfa_methods")
    if set(methods) - set(IMPORTABLE_MFA_METHODS):
        raise RecordProblem(
            "enrolled_mfa_methods may hold email_otp and sms_otp only (an authenticator app's "
            "secret is not part of a record: its user enrols again)"
        )
    fields: dict[str, Any] = {**texts, **times, "created_at": created}
    fields["updated_at"] = times["updated_at"] or created
    user = User(
        id=_id(record),
        password_hash=password_hash,
        roles=roles,
        signup_methods=signup_methods,
        enrolled_mfa_methods=methods,
        is_multi_factor_auth_enabled=_bool(record, "is_multi_factor_auth_enabled"),
        app_data=_app_data(record),
        **fields,
    )
    return ImportedUser(user, id_given="id" in record, dated=times["updated_at"] is not None)


def record_of(user: User) -> dict[str, Any]:
    """The record of a stored user (what an export writes): every field, hash included;
    an authenticator app's enrolment is left out (its secret is not in the record)."""
    record: dict[str, Any] = {"id": user.id}
    for name in (*TEXT_FIELDS, *TIME_FIELDS):
        value = getattr(user, name)
        if value is not None:
            record[name] = value
    record["roles"] = list(user.roles)
    record["signup_methods"] = list(user.signup_methods)
    methods = [m for m in user.enrolled_mfa_methods if m in IMPORTABLE_MFA_METHODS]
    if methods:
        record["enrolled_mfa_methods"] = methods
    if user.is_multi_factor_auth_enabled is not None:
        record["is_multi_factor_auth_enabled"] = user.is_multi_factor_auth_enabled
    if user.app_data:
        record["app_data"] = dict(user.app_data)
    if user.password_hash:
        record["password_hash"] = user.password_hash
    return record


# ---------------------------------------------------------------------------------- fields


def _id(record: Mapping[str, Any]) -> str:
    value = record.get("id")
    if value is None:
        return str(uuid.uuid4())
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise RecordProblem("id must be 1-36 letters, digits or _.:- (a UUID, say)")
    return value


def _text(record: Mapping[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise RecordProblem(f"{name} must be a string")
    if len(value) > TEXT_LIMITS[name]:
        raise RecordProblem(f"{name} is longer than {TEXT_LIMITS[name]} characters")
    if has_control_character(value):
        raise RecordProblem(f"{name} contains a control character")
    return value.strip()


def _time(record: Mapping[str, Any], name: str) -> int | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RecordProblem(f"{name} must be Unix seconds (a number)")
    if not 0 <= value <= _LATEST:
        raise RecordProblem(f"{name} must be Unix seconds between 0 and {_LATEST}")
    return int(value)


def _bool(record: Mapping[str, Any], name: str) -> bool | None:
    value = record.get(name)
    if value is not None and not isinstance(value, bool):
        raise RecordProblem(f"{name} must be true or false")
    return value


def _list(record: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = record.get(name, [])
    if isinstance(value, str):  # Authorizer's comma-joined form
        value = [part for part in value.split(",") if part]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RecordProblem(f"{name} must be a list of strings")
    bad = [v for v in value if not _LIST_ITEM.fullmatch(v)]
    if bad:
        raise RecordProblem(f"{name} holds {bad[0]!r}: 1-64 letters, digits or _.:- each")
    return tuple(dict.fromkeys(value))


def _app_data(record: Mapping[str, Any]) -> dict[str, Any]:
    value = record.get("app_data") or {}
    if not isinstance(value, dict):
        raise RecordProblem("app_data must be a JSON object")
    if len(json.dumps(value, separators=(",", ":"))) > TEXT_LIMITS["app_data"]:
        raise RecordProblem(f"app_data is longer than {TEXT_LIMITS['app_data']} characters")
    return value


def _password(record: Mapping[str, Any], firebase: FirebaseParameters | None) -> str | None:
    stored, salt = record.get("password_hash"), record.get("password_salt")
    if stored is None:
        if salt is not None:
            raise RecordProblem("password_salt without password_hash")
        return None
    if not isinstance(stored, str) or not isinstance(salt, str | None):
        raise RecordProblem("password_hash and password_salt must be strings")
    try:
        if salt is not None:
            if firebase is None:
                raise RecordProblem(
                    "password_salt is for Firebase hashes: give the project's hash parameters "
                    "(--firebase-signer-key, --firebase-salt-separator, --firebase-rounds, "
                    "--firebase-mem-cost)"
                )
            stored = firebase.stored(stored, salt)
        parse_hash(stored)
    except UnusableHash as exc:
        raise RecordProblem(f"password_hash is unusable: {exc}") from None
    return stored
