"""Small interfaces through which the outside world reaches ``core``.

Time, randomness and identifiers are injected so that every transition is
deterministic under test. The runtime passes the real implementations
(``service.system``); tests pass fixed ones.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Clock", "IdSource", "Randomness"]


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
