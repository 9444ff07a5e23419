"""Password hashing: argon2id in worker threads, never on the event loop.

Parameters are OWASP's argon2id minimum (t=2, m=19 MiB, p=1): about 20 ms per hash on
this project's reference machine. Hashes imported from Authorizer (bcrypt) or from any other
system (:mod:`service.hash_formats`) verify, and :meth:`PasswordHasher.verify` says they
need a rehash, so the caller replaces them with argon2id on that login.
A capacity limiter keeps concurrent hashes to the number of cores (shared out among the
``--workers``): more would only queue inside the CPU and inflate every request's latency.
"""

from __future__ import annotations

import os

import argon2
import trio

from bastion.service import tracing
from bastion.service.hash_formats import UnusableHash, parse_hash

TIME_COST = 2
MEMORY_COST_KIB = 19456
PARALLELISM = 1

_ARGON2ID = "$argon2id$"


def hashes_at_once(processes: int = 1) -> int:
    """How many hashes each of ``processes`` server processes runs at once: the cores
    shared out, rounded up (two workers on two cores: one each, not two each, which put
    four 19 MiB hashes on two cores and the event loops behind them)."""
    return max(1, -(-(os.cpu_count() or 1) // max(1, processes)))


class PasswordHasher:
    def __init__(self, *, concurrency: int | None = None) -> None:
        self._argon2 = argon2.PasswordHasher(
            time_cost=TIME_COST,
            memory_cost=MEMORY_COST_KIB,
            parallelism=PARALLELISM,
            type=argon2.Type.ID,
        )
        self._limiter = trio.CapacityLimiter(concurrency or hashes_at_once())
        # Verified against when the account does not exist, so that "no such user" costs
        # the same time as "wrong password".
        self._dummy = self._argon2.hash("bastion-dummy-password")

    async def hash(self, password: str) -> str:
        with tracing.span("argon2 hash"):
            return await trio.to_thread.run_sync(self._argon2.hash, password, limiter=self._limiter)

    async def verify(self, stored: str, password: str) -> tuple[bool, bool]:
        """(matches, needs_rehash). A malformed stored hash never matches. Its span
        includes the wait for a free core."""
        with tracing.span("argon2 verify"):
            return await trio.to_thread.run_sync(
                self._verify_sync, stored, password, limiter=self._limiter
            )

    async def verify_dummy(self, password: str) -> None:
        await self.verify(self._dummy, password)

    def _verify_sync(self, stored: str, password: str) -> tuple[bool, bool]:
        if stored.startswith(_ARGON2ID):
            try:
                self._argon2.verify(stored, password)
            except (argon2.exceptions.VerificationError, argon2.exceptions.InvalidHashError):
                return False, False
            return True, self._argon2.check_needs_rehash(stored)
        try:
            matches = parse_hash(stored).verify(password)
        except UnusableHash:
            return False, False
        return matches, matches
