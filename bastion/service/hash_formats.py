"""Password hashes written by other systems: which format a stored hash is in, and whether a
password matches it.

bastion writes argon2id only; these formats arrive by import (``bastion import users``,
``bastion import authorizer``), verify at sign-in, and are replaced by argon2id on the first
sign-in that passes (:class:`~service.passwords.PasswordHasher` says "needs rehash"). Every
primitive is the standard library's (``hashlib.scrypt``, ``hashlib.pbkdf2_hmac``), bcrypt's,
argon2-cffi's or cryptography's (AES-CTR for Firebase's scrypt variant); nothing here is
hand-written cryptography, only the encodings around it.

Accepted (README "Importing users"):

- bcrypt ``$2a$`` / ``$2b$`` / ``$2y$`` (Authorizer, Go, most PHP and Node systems);
- argon2id and argon2i in the PHC form ``$argon2id$v=19$m=..,t=..,p=..$salt$hash``, also
  with Django's ``argon2`` prefix;
- scrypt: PHC ``$scrypt$ln=14,r=8,p=1$salt$hash`` (passlib) and Django's
  ``scrypt$N$salt$r$p$hash``;
- PBKDF2-HMAC-SHA256/SHA512: PHC ``$pbkdf2-sha256$ROUNDS$salt$hash`` (passlib; ``i=ROUNDS``
  too) and Django's ``pbkdf2_sha256$ROUNDS$salt$hash`` (and ``pbkdf2_sha512``);
- Firebase's scrypt variant, as :func:`firebase_scrypt_hash` writes it from a Firebase
  export and the project's hash parameters.

Work factors are bounded (:data:`LIMITS`): a hash asking for more would make one sign-in hold
a core (or gigabytes) for seconds, so it is refused at import rather than at sign-in.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

import argon2
import bcrypt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = ["LIMITS", "ParsedHash", "UnusableHash", "firebase_scrypt_hash", "parse_hash"]


class UnusableHash(ValueError):
    """A stored hash bastion cannot verify: unknown format, malformed, or beyond the limits."""


#: Work factors bastion accepts: above them a hash is refused at import.
LIMITS = {
    "pbkdf2_rounds": 10_000_000,
    #: bytes one scrypt evaluation may use (128 * N * r)
    "scrypt_memory": 256 * 1024 * 1024,
    "scrypt_parallelism": 16,
}
_MAX_STORED = 256  # the password column's length


@dataclass(frozen=True, slots=True)
class ParsedHash:
    """A hash in a known format: its name (``bcrypt``, ``argon2id``, ``scrypt``, ...) and the
    check of a password against it."""

    format: str
    _check: Callable[[bytes], bool]

    def verify(self, password: str) -> bool:
        return self._check(password.encode())


def parse_hash(stored: str) -> ParsedHash:
    """The format of ``stored`` and how to verify it; raises :class:`UnusableHash` naming
    what is wrong (never quoting the hash)."""
    if len(stored) > _MAX_STORED:
        raise UnusableHash(f"longer than {_MAX_STORED} characters")
    for pattern, parse in _PARSERS:
        match = pattern.fullmatch(stored)
        if match is not None:
            return parse(match)
    raise UnusableHash(
        "not a known hash format (bcrypt, argon2id/argon2i, scrypt, PBKDF2-SHA256/SHA512, "
        "firebase-scrypt)"
    )


# ------------------------------------------------------------------------------ encodings

_B64 = r"[A-Za-z0-9+/.=_-]+"


def _b64(text: str, what: str) -> bytes:
    """Standard, URL-safe or passlib's adapted base64 (``.`` for ``+``), padding optional."""
    normal = text.replace(".", "+").replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise UnusableHash(f"its {what} is not base64") from None


def _equal(a: bytes, b: bytes) -> bool:
    return hmac.compare_digest(a, b)


# ------------------------------------------------------------------------- bcrypt, argon2


def _bcrypt(match: re.Match[str]) -> ParsedHash:
    stored = match.group(0).encode()

    def check(password: bytes) -> bool:
        try:
            return bcrypt.checkpw(password, stored)
        except ValueError:
            return False

    return ParsedHash("bcrypt", check)


_ARGON2 = argon2.PasswordHasher()


def _argon2(match: re.Match[str]) -> ParsedHash:
    encoded = match.group("encoded")
    try:
        parameters = argon2.extract_parameters(encoded)
    except argon2.exceptions.InvalidHashError:
        raise UnusableHash("a malformed argon2 hash") from None
    if parameters.memory_cost * 1024 > LIMITS["scrypt_memory"]:
        raise UnusableHash("its argon2 memory cost is beyond bastion's limit")

    def check(password: bytes) -> bool:
        try:
            return _ARGON2.verify(encoded, password)
        except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
            return False

    return ParsedHash(encoded.split("$")[1], check)


# ----------------------------------------------------------------------------------- scrypt


def _scrypt_memory(n: int, r: int, p: int) -> int:
    """The bytes one scrypt evaluation takes; refuses parameters out of bounds."""
    if n < 2 or n & (n - 1) or r < 1 or p < 1:
        raise UnusableHash("its scrypt parameters are invalid (N a power of two, r and p >= 1)")
    memory = 128 * n * r
    if memory > LIMITS["scrypt_memory"] or p > LIMITS["scrypt_parallelism"]:
        raise UnusableHash("its scrypt work factor is beyond bastion's limit")
    return memory


def _scrypt_check(salt: bytes, n: int, r: int, p: int, expected: bytes) -> Callable[[bytes], bool]:
    memory = _scrypt_memory(n, r, p)

    def check(password: bytes) -> bool:
        derived = hashlib.scrypt(
            password, salt=salt, n=n, r=r, p=p, dklen=len(expected), maxmem=memory * 2
        )
        return _equal(derived, expected)

    return check


def _scrypt_phc(match: re.Match[str]) -> ParsedHash:
    salt, expected = _b64(match["salt"], "salt"), _b64(match["hash"], "hash")
    check = _scrypt_check(salt, 2 ** int(match["ln"]), int(match["r"]), int(match["p"]), expected)
    return ParsedHash("scrypt", check)


def _scrypt_django(match: re.Match[str]) -> ParsedHash:
    expected = _b64(match["hash"], "hash")
    salt = match["salt"].encode()
    check = _scrypt_check(salt, int(match["n"]), int(match["r"]), int(match["p"]), expected)
    return ParsedHash("scrypt", check)


# ----------------------------------------------------------------------------------- PBKDF2


def _pbkdf2(digest: str, salt: bytes, rounds: int, expected: bytes) -> ParsedHash:
    if not 1 <= rounds <= LIMITS["pbkdf2_rounds"]:
        raise UnusableHash("its PBKDF2 rounds are out of bastion's range")
    if not expected:
        raise UnusableHash("its PBKDF2 hash is empty")

    def check(password: bytes) -> bool:
        derived = hashlib.pbkdf2_hmac(digest, password, salt, rounds, dklen=len(expected))
        return _equal(derived, expected)

    return ParsedHash(f"pbkdf2-{digest}", check)


def _pbkdf2_phc(match: re.Match[str]) -> ParsedHash:
    salt, expected = _b64(match["salt"], "salt"), _b64(match["hash"], "hash")
    return _pbkdf2(match["digest"], salt, int(match["rounds"]), expected)


def _pbkdf2_django(match: re.Match[str]) -> ParsedHash:
    expected = _b64(match["hash"], "hash")
    return _pbkdf2(match["digest"], match["salt"].encode(), int(match["rounds"]), expected)


# -------------------------------------------------------------------------- firebase scrypt

_FIREBASE_PREFIX = "$firebase-scrypt$"


def firebase_scrypt_hash(
    *, password_hash: str, salt: str, signer_key: str, salt_separator: str, rounds: int,
    mem_cost: int,
) -> str:  # fmt: skip
    """The stored form of a Firebase account's hash: its own ``passwordHash`` and ``salt``
    (base64, as ``firebase auth:export`` writes them) with the project's hash parameters
    (Firebase console, Authentication, "Password hash parameters"). Raises
    :class:`UnusableHash` when it would not verify."""
    parts = {
        "hash": password_hash, "salt": salt, "signer key": signer_key,
        "salt separator": salt_separator,
    }  # fmt: skip
    for what, value in parts.items():
        _b64(value, what)
    stored = (
        f"{_FIREBASE_PREFIX}r={rounds},m={mem_cost}${salt_separator}${signer_key}${salt}$"
        f"{password_hash}"
    )
    parse_hash(stored)
    return stored


def _firebase(match: re.Match[str]) -> ParsedHash:
    rounds, mem_cost = int(match["r"]), int(match["m"])
    separator = _b64(match["sep"], "salt separator")
    signer_key, salt = _b64(match["key"], "signer key"), _b64(match["salt"], "salt")
    expected = _b64(match["hash"], "hash")
    if not 1 <= mem_cost <= 20:
        raise UnusableHash("its Firebase mem_cost is out of range (1-20)")
    memory = _scrypt_memory(2**mem_cost, rounds, 1)

    # Firebase's variant: scrypt(password, salt + separator) keys AES-256-CTR (zero IV),
    # which encrypts the project's signer key; the result is the stored hash.
    def check(password: bytes) -> bool:
        key = hashlib.scrypt(
            password, salt=salt + separator, n=2**mem_cost, r=rounds, p=1, dklen=64,
            maxmem=2 * memory,
        )  # fmt: skip
        encryptor = Cipher(algorithms.AES(key[:32]), modes.CTR(b"\0" * 16)).encryptor()
        return _equal(encryptor.update(signer_key) + encryptor.finalize(), expected)

    return ParsedHash("firebase-scrypt", check)


_PARSERS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], ParsedHash]], ...] = (
    (re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}"), _bcrypt),
    (re.compile(r"(?:argon2)?(?P<encoded>\$argon2(?:id|i)\$.+)"), _argon2),
    (
        re.compile(rf"\$scrypt\$ln=(?P<ln>\d{{1,2}}),r=(?P<r>\d{{1,3}}),p=(?P<p>\d{{1,3}})"
                   rf"\$(?P<salt>{_B64})\$(?P<hash>{_B64})"),
        _scrypt_phc,
    ),
    (
        re.compile(r"scrypt\$(?P<n>\d{1,9})\$(?P<salt>[^$]+)\$(?P<r>\d{1,3})\$(?P<p>\d{1,3})"
                   rf"\$(?P<hash>{_B64})"),
        _scrypt_django,
    ),
    (
        re.compile(rf"\$pbkdf2-(?P<digest>sha256|sha512)\$(?:i=)?(?P<rounds>\d{{1,9}})"
                   rf"\$(?P<salt>{_B64})\$(?P<hash>{_B64})"),
        _pbkdf2_phc,
    ),
    (
        re.compile(r"pbkdf2_(?P<digest>sha256|sha512)\$(?P<rounds>\d{1,9})\$(?P<salt>[^$]+)"
                   rf"\$(?P<hash>{_B64})"),
        _pbkdf2_django,
    ),
    (
        re.compile(rf"\$firebase-scrypt\$r=(?P<r>\d{{1,2}}),m=(?P<m>\d{{1,2}})\$(?P<sep>{_B64})"
                   rf"\$(?P<key>{_B64})\$(?P<salt>{_B64})\$(?P<hash>{_B64})"),
        _firebase,
    ),
)  # fmt: skip
