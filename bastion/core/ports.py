"""Small interfaces through which the outside world reaches ``core``.

Time, randomness and identifiers are injected so that every transition is
deterministic under test. The runtime passes the real implementations
(``service.system``); tests pass fixed ones. :class:`PasswordHasher` and
:class:`TokenSigner` are what a driver answers ``VerifyPasswordHash`` / ``HashPassword``
and signs tokens with; ``core.reference`` has default implementations (argon2, JWT).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["Clock", "IdSource", "PasswordHasher", "Randomness", "TokenSigner"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...


class Randomness(Protocol):
    def token_bytes(self, n: int) -> bytes: ...

    def randbelow(self, n: int) -> int: ...


class IdSource(Protocol):
    def new_id(self) -> str:
        """A fresh, unguessable identifier (a UUID string)."""
        ...


class PasswordHasher(Protocol):
    def hash(self, password: str) -> str: ...

    def verify(self, password_hash: str, password: str) -> tuple[bool, bool]:
        """``(matches, needs_rehash)``; a malformed stored hash never matches."""
        ...

    def verify_dummy(self, password: str) -> None:
        """Cost what ``verify`` costs, for an account that has no hash (timing)."""
        ...


class TokenSigner(Protocol):
    #: the JWS ``alg`` (the ID token's ``at_hash`` depends on it)
    @property
    def algorithm(self) -> str: ...

    def sign(self, claims: Mapping[str, Any]) -> str: ...

    def verify(self, token: str) -> dict[str, Any]:
        """The claims if the signature holds (claims are not checked); else raise
        ``core.errors.Unauthenticated``."""
        ...
