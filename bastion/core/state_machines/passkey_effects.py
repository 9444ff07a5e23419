"""The passkey flow's own effects and their reply events (:mod:`core.state_machines.passkey`).

The service carries them out: ceremonies in the memory store, credentials in SQL, and
the WebAuthn cryptography (``VerifyAttestation``, ``VerifyAssertion``) with the
``webauthn`` library against the relying party's id and origins.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bastion.core.auth.passkeys import Ceremony, PasskeyCredential
from bastion.core.state_machines._machine import Effect, Event

__all__ = [
    "AssertionVerified",
    "AttestationVerified",
    "CeremonyTaken",
    "CredentialLoaded",
    "CredentialStored",
    "CredentialUseRecorded",
    "CredentialsLoaded",
    "LoadCredential",
    "LoadCredentials",
    "RecordCredentialUse",
    "StoreCeremony",
    "StoreCredential",
    "TakeCeremony",
    "VerifyAssertion",
    "VerifyAttestation",
]

# -- replies -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CredentialsLoaded(Event):
    credentials: tuple[PasskeyCredential, ...]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CredentialLoaded(Event):
    credential: PasskeyCredential | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CeremonyTaken(Event):
    """The ceremony removed by this request; ``None``: never issued, expired or used."""

    ceremony: Ceremony | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttestationVerified(Event):
    """``credential`` is None when the response failed verification (``reason`` says why)."""

    credential: PasskeyCredential | None
    user_verified: bool = False
    reason: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AssertionVerified(Event):
    ok: bool
    sign_count: int = 0
    user_verified: bool = False
    backup_eligible: bool = False
    backed_up: bool = False
    reason: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CredentialStored(Event):
    """``ok`` False: that credential id is registered already (to anyone)."""

    ok: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CredentialUseRecorded(Event):
    """``ok`` False: another sign-in moved the counter first (compare-and-set)."""

    ok: bool


# -- effects -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreCeremony(Effect):
    """Keep ``ceremony`` under its challenge until ``expires_at``."""

    ceremony: Ceremony


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TakeCeremony(Effect):
    """Get and delete the ceremony of ``challenge`` in one step (single use)."""

    replies: ClassVar[tuple[type[Event], ...]] = (CeremonyTaken,)
    challenge: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadCredentials(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (CredentialsLoaded,)
    user_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadCredential(Effect):
    """The stored credential with this authenticator credential id (base64url)."""

    replies: ClassVar[tuple[type[Event], ...]] = (CredentialLoaded,)
    credential_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerifyAttestation(Effect):
    """Check a registration response against the ceremony; answer the new credential."""

    replies: ClassVar[tuple[type[Event], ...]] = (AttestationVerified,)
    ceremony: Ceremony
    response: str = dataclasses.field(repr=False)
    name: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerifyAssertion(Effect):
    """Check a sign-in response's signature against ``credential`` and the ceremony. The
    counter, flags and user verification are the machine's to judge."""

    replies: ClassVar[tuple[type[Event], ...]] = (AssertionVerified,)
    ceremony: Ceremony
    credential: PasskeyCredential
    response: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreCredential(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (CredentialStored,)
    credential: PasskeyCredential


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordCredentialUse(Effect):
    """Set the counter and backup state, only if the counter is still ``previous``."""

    replies: ClassVar[tuple[type[Event], ...]] = (CredentialUseRecorded,)
    credential: PasskeyCredential
    previous: int
    sign_count: int
    backed_up: bool
    at: int
