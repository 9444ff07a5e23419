"""Passkey (WebAuthn) rules that need no state: ceremonies, stored credentials, counters.

A :class:`Ceremony` is one issued challenge: it lives in the memory store under its
challenge (base64url, the value the browser signs inside ``clientDataJSON``) for
:data:`CEREMONY_TTL` seconds and is TAKEN by the verify that presents it, so a challenge
answers once. The cryptography (attestation, assertion signatures, origin and rp id) is
the ``webauthn`` library's, run by the service; what to make of a verified response (sign
counter, backup flags, user verification) is decided here and in
:mod:`core.state_machines.passkey`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import json
from typing import Any

from bastion.core.auth.user import User
from bastion.core.errors import InvalidArgument

__all__ = [
    "ALLOW_NONE",
    "CEREMONY_TTL",
    "Ceremony",
    "CeremonyKind",
    "PasskeyCredential",
    "PasskeyOptions",
    "client_challenge",
    "counter_moved_back",
    "credential_id_of",
]

#: Seconds an issued challenge can be answered.
CEREMONY_TTL = 300
#: Longest credential (JSON) accepted from a client.
MAX_CREDENTIAL_JSON = 65536
INVALID_CREDENTIAL = "invalid passkey credential"
#: ``Ceremony.allowed`` that no credential matches (no credential id is empty): options
#: for a named user with no passkeys look like any other's, and admit nobody.
ALLOW_NONE: tuple[str, ...] = ("",)


class CeremonyKind(enum.StrEnum):
    #: a signed-in user adds a passkey
    REGISTER = "register"
    #: sign-in with a passkey alone (a discoverable credential, or one of a named user's)
    PASSWORDLESS = "passwordless"
    #: the second factor of a password login parked behind the ``mfa`` cookie
    SECOND_FACTOR = "second_factor"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Ceremony:
    challenge: str
    kind: CeremonyKind
    #: the user it is for; empty for a discoverable sign-in (the credential names them)
    user_id: str = ""
    #: credentials (base64url ids) the answer may come from; empty = any of the user's
    allowed: tuple[str, ...] = ()
    #: the pending MFA challenge a SECOND_FACTOR ceremony finishes
    mfa_challenge_id: str = ""
    #: the user must be verified by the authenticator (PIN, biometrics)
    user_verification: bool = False
    expires_at: int = 0

    def __post_init__(self) -> None:
        if not self.challenge:
            raise ValueError("a ceremony needs a challenge")
        if self.kind is not CeremonyKind.PASSWORDLESS and not self.user_id:
            raise ValueError(f"a {self.kind} ceremony names its user")
        if (self.kind is CeremonyKind.SECOND_FACTOR) != bool(self.mfa_challenge_id):
            raise ValueError("exactly the second-factor ceremony names an MFA challenge")

    def to_json(self) -> bytes:
        data = dataclasses.asdict(self)
        data["kind"] = self.kind.value
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Ceremony:
        data = json.loads(raw)
        data["kind"] = CeremonyKind(data["kind"])
        data["allowed"] = tuple(data["allowed"])
        return cls(**data)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PasskeyCredential:
    """A stored credential (the public half; the private key never leaves the device)."""

    id: str
    user_id: str
    #: base64url of the authenticator's credential id (unique across users)
    credential_id: str
    public_key: bytes = dataclasses.field(repr=False)
    sign_count: int = 0
    transports: tuple[str, ...] = ()
    name: str = ""
    #: BE: the credential may be synced; fixed for a credential's life
    backup_eligible: bool = False
    #: BS: it is backed up now
    backed_up: bool = False
    created_at: int = 0
    updated_at: int = 0
    last_used_at: int | None = None

    def to_api_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "transports": list(self.transports),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "last_used_at": self.last_used_at,
        }


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PasskeyOptions:
    """What ``navigator.credentials.create()``/``get()`` needs; the service renders it as
    the ``webauthn`` library's options JSON."""

    ceremony: Ceremony
    #: registration: the user the credential is made for
    user: User | None = None
    #: registration: excluded (already registered); sign-in: allowed
    credentials: tuple[PasskeyCredential, ...] = ()


def counter_moved_back(stored: int, presented: int) -> bool:
    """WebAuthn L2 6.1.1: a counter that did not increase hints at a cloned key, unless
    both are zero (authenticators that keep no counter, as synced passkeys do)."""
    if stored == 0 and presented == 0:
        return False
    return presented <= stored


def _b64url(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def _parsed(credential: str) -> dict[str, Any]:
    if not credential or len(credential) > MAX_CREDENTIAL_JSON:
        raise InvalidArgument(INVALID_CREDENTIAL)
    try:
        parsed = json.loads(credential)
    except ValueError:
        raise InvalidArgument(INVALID_CREDENTIAL) from None
    if not isinstance(parsed, dict):
        raise InvalidArgument(INVALID_CREDENTIAL)
    return parsed


def client_challenge(credential: str) -> str:
    """The challenge a ``PublicKeyCredential`` (JSON) answers: the key of its ceremony."""
    response = _parsed(credential).get("response")
    raw = response.get("clientDataJSON") if isinstance(response, dict) else None
    try:
        client_data = json.loads(_b64url(raw)) if isinstance(raw, str) else None
    except (ValueError, binascii.Error):
        client_data = None
    challenge = client_data.get("challenge") if isinstance(client_data, dict) else None
    if not isinstance(challenge, str) or not challenge or len(challenge) > 256:
        raise InvalidArgument(INVALID_CREDENTIAL)
    return challenge


def credential_id_of(credential: str) -> str:
    """The credential id (base64url) a ``PublicKeyCredential`` (JSON) names."""
    raw = _parsed(credential).get("rawId") or _parsed(credential).get("id")
    if not isinstance(raw, str) or not raw or len(raw) > 1024:
        raise InvalidArgument(INVALID_CREDENTIAL)
    try:
        return base64.urlsafe_b64encode(_b64url(raw)).rstrip(b"=").decode()
    except (ValueError, binascii.Error):
        raise InvalidArgument(INVALID_CREDENTIAL) from None
