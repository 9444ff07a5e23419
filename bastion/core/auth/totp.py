"""Authenticator apps (TOTP, RFC 6238) and their recovery codes.

Codes are the RFC 6238 defaults every authenticator app uses: 6 digits, 30-second steps,
HMAC-SHA1 (pyotp computes them; it does no I/O). A code is accepted for the current step
and one step either side (clock drift), and **only for a step later than the last one
accepted**: the caller stores the returned step (``last_used_step``, compared and set
atomically by the driver), so a code, once used, is refused for the rest of its window.

Recovery codes: :data:`RECOVERY_CODE_COUNT` codes of 100 random bits each, shown once at
enrolment, stored as SHA-256 digests (that many bits make an unkeyed digest safe), each
usable once.

The secret is 160 random bits (RFC 4226's recommended length), base32 as apps expect it;
at rest it is encrypted (:mod:`bastion.service.secretbox`).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac

import pyotp

from bastion.core.ports import Randomness

__all__ = [
    "DIGITS",
    "RECOVERY_CODE_COUNT",
    "STEP_SECONDS",
    "TOTP_CHALLENGE_TTL",
    "Authenticator",
    "find_recovery_code",
    "matching_step",
    "new_recovery_codes",
    "new_secret",
    "provisioning_uri",
    "recovery_digest",
]

DIGITS = 6
STEP_SECONDS = 30
#: steps accepted either side of the current one
DRIFT_STEPS = 1
RECOVERY_CODE_COUNT = 10
_SECRET_BYTES = 20
_RECOVERY_BYTES = 13  # 104 bits, of which the 20 base32 characters keep 100
#: How long a login waits for an authenticator code (enrolment included): 5 minutes.
TOTP_CHALLENGE_TTL = 5 * 60


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Authenticator:
    """A user's authenticator as the flows see it (the secret already decrypted)."""

    user_id: str
    secret: str = dataclasses.field(repr=False)
    #: the first code was accepted: enrolment is complete
    verified: bool = False
    #: the last time step a code was accepted for (replay protection)
    last_used_step: int | None = None
    #: digests of the recovery codes not used yet
    recovery_digests: tuple[str, ...] = dataclasses.field(default=(), repr=False)

    def __post_init__(self) -> None:
        if not self.user_id or not self.secret:
            raise ValueError("an authenticator needs a user and a secret")


def new_secret(randomness: Randomness) -> str:
    return base64.b32encode(randomness.token_bytes(_SECRET_BYTES)).decode()


def provisioning_uri(secret: str, *, account: str, issuer: str) -> str:
    """The ``otpauth://totp/...`` URI an app scans (the QR code's content)."""
    return pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS).provisioning_uri(
        name=account, issuer_name=issuer
    )


def matching_step(secret: str, code: str, *, now: float, last_used_step: int | None) -> int | None:
    """The time step ``code`` is valid for (now +-1 step, later than ``last_used_step``),
    or ``None``. Every candidate step is compared, in constant time, whatever matches."""
    candidate = code.replace(" ", "")
    if len(candidate) != DIGITS or not candidate.isascii() or not candidate.isdigit():
        return None
    totp = pyotp.TOTP(secret, digits=DIGITS, interval=STEP_SECONDS)
    current = int(now) // STEP_SECONDS
    found = None
    for step in range(current - DRIFT_STEPS, current + DRIFT_STEPS + 1):
        fresh = last_used_step is None or step > last_used_step
        if hmac.compare_digest(totp.at(step * STEP_SECONDS), candidate) and fresh:
            found = step
    return found


def _normalise_recovery(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def recovery_digest(code: str) -> str:
    return hashlib.sha256(_normalise_recovery(code).encode()).hexdigest()


def new_recovery_codes(randomness: Randomness) -> tuple[str, ...]:
    """Fresh codes as shown to the user: ``XXXXX-XXXXX-XXXXX-XXXXX`` (base32)."""
    codes = []
    for _ in range(RECOVERY_CODE_COUNT):
        raw = base64.b32encode(randomness.token_bytes(_RECOVERY_BYTES)).decode()[:20]
        codes.append("-".join(raw[i : i + 5] for i in range(0, 20, 5)))
    return tuple(codes)


def find_recovery_code(code: str, digests: tuple[str, ...]) -> str | None:
    """The stored digest ``code`` matches, if any (every digest compared, constant time)."""
    if len(_normalise_recovery(code)) != 20:
        return None
    wanted = recovery_digest(code)
    found = None
    for digest in digests:
        if hmac.compare_digest(digest, wanted):
            found = digest
    return found
