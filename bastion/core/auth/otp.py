"""One-time codes sent by email or SMS: how they are made, stored and checked.

A code is 6 decimal digits drawn from the injected :class:`~core.ports.Randomness`
(``secrets`` in production), so every digit is uniform. Only a keyed digest is ever
stored: ``hex(HMAC-SHA256(key, "<challenge id>:<code>"))``. The key is derived from a
server secret (:func:`derive_key`), so a copy of the memory store does not let anyone
brute-force the million possible codes offline; binding the challenge id into the digest
means a code can never be replayed against another challenge. Comparison is constant-time.

Lifetimes (seconds), chosen for the delivery channel: an emailed or texted code at login
or password reset lives :data:`OTP_TTL`, a phone-verification code at signup lives
:data:`PHONE_VERIFICATION_TTL`; a challenge allows :data:`MAX_ATTEMPTS` wrong codes, and a
new code may be requested :data:`RESEND_INTERVAL` seconds after the last one, at most
:data:`MAX_SENDS` codes per challenge.
"""

from __future__ import annotations

import hashlib
import hmac

from bastion.core.ports import Randomness

__all__ = [
    "CODE_DIGITS",
    "MAX_ATTEMPTS",
    "MAX_SENDS",
    "OTP_TTL",
    "PHONE_VERIFICATION_TTL",
    "RESEND_INTERVAL",
    "USER_GUESS_BUDGET",
    "USER_GUESS_WINDOW",
    "code_digest",
    "code_matches",
    "derive_key",
    "new_code",
    "normalise_code",
]

CODE_DIGITS = 6
#: An emailed or texted code at login, on resend, or for a password reset: 5 minutes.
OTP_TTL = 5 * 60
#: A code texted to verify a phone number at signup: 10 minutes.
PHONE_VERIFICATION_TTL = 10 * 60
#: Wrong codes a challenge tolerates; the last one kills it.
MAX_ATTEMPTS = 5
#: Second-factor codes one user may have checked per window, across challenges, factors
#: (emailed, texted, authenticator and recovery codes) and the self-service path: a right
#: code gives its attempt back, so this counts wrong ones.
USER_GUESS_BUDGET = 10
USER_GUESS_WINDOW = 15 * 60
#: Seconds between two codes of one challenge.
RESEND_INTERVAL = 30
#: Codes one challenge may send in all (the first one included).
MAX_SENDS = 5

_KEY_LABEL = b"bastion/otp/v1"


def derive_key(server_secret: str | bytes, purpose: bytes = _KEY_LABEL) -> bytes:
    """A 32-byte key for ``purpose`` derived from a server secret (HMAC-SHA256 as a PRF),
    so the secret itself is never used directly for two jobs."""
    secret = server_secret.encode() if isinstance(server_secret, str) else server_secret
    if not secret:
        raise ValueError("the server secret must not be empty")
    return hmac.new(secret, purpose, hashlib.sha256).digest()


def new_code(randomness: Randomness) -> str:
    """Six uniformly random decimal digits (leading zeros kept)."""
    return f"{randomness.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"


def normalise_code(code: str) -> str:
    """What a person typed, without spaces or dashes ("123 456" is "123456")."""
    return "".join(ch for ch in code if ch not in " -\t")


def code_digest(key: bytes, challenge_id: str, code: str) -> str:
    if not challenge_id:
        raise ValueError("a code digest needs its challenge id")
    message = f"{challenge_id}:{normalise_code(code)}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def code_matches(key: bytes, challenge_id: str, code: str, digest: str) -> bool:
    """Constant-time: does ``code`` belong to the challenge whose stored digest is given?"""
    candidate = normalise_code(code)
    if len(candidate) != CODE_DIGITS or not candidate.isascii() or not candidate.isdigit():
        return False
    return hmac.compare_digest(code_digest(key, challenge_id, candidate), digest)
