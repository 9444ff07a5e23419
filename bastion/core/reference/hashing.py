"""The default :class:`~core.ports.PasswordHasher`: argon2id (``pip install bastion-core[argon2]``).

argon2 is imported when a hasher is made, never when ``core`` is imported, so a driver
that brings its own hasher does not need it.
"""

from __future__ import annotations

from typing import Any

from bastion.core.extras import import_extra

__all__ = ["Argon2Hasher"]


class Argon2Hasher:
    """argon2id with the server's parameters (time 3, 64 MiB, 1 lane); synchronous, so an
    async driver runs it in a worker thread."""

    def __init__(self, *, time_cost: int = 3, memory_cost_kib: int = 64 * 1024) -> None:
        argon2: Any = import_extra("argon2", extra="argon2", feature="Argon2Hasher")
        self._errors = (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError)
        self._argon2 = argon2.PasswordHasher(
            time_cost=time_cost, memory_cost=memory_cost_kib, parallelism=1, type=argon2.Type.ID
        )
        self._dummy: str = self._argon2.hash("bastion-dummy-password")

    def hash(self, password: str) -> str:
        result: str = self._argon2.hash(password)
        return result

    def verify(self, password_hash: str, password: str) -> tuple[bool, bool]:
        try:
            self._argon2.verify(password_hash, password)
        except self._errors:
            return False, False
        return True, bool(self._argon2.check_needs_rehash(password_hash))

    def verify_dummy(self, password: str) -> None:
        self.verify(self._dummy, password)
