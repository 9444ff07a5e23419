"""Carries out the MFA flow's challenge effects against the memory store.

The flow driver hands every effect of :data:`CHALLENGE_EFFECTS` to
:meth:`ChallengeStore.execute` and feeds the returned event (if any) back to the machine.
The guarantees :mod:`core.state_machines.mfa_effects` asks for come from the memory
store's atomic primitives, on every backend (in-process, SQL, Redis), so a challenge
begun on one server process can be finished on another:

- a challenge is JSON under ``mfa_challenge:<id>`` for exactly its remaining lifetime;
- ``TakeChallenge`` is the store's ``take`` (get-and-delete, one winner);
- ``CountAttempt`` is ``incr`` on ``mfa_attempts:<id>``, living as long as the challenge.

Codes are generated from the injected randomness and compared with the keyed digest of
:mod:`core.auth.otp`. Authenticator effects (``LoadAuthenticator``, ``EnrolAuthenticator``,
and the spending ``RecordTotpStep``, ``UseRecoveryCode``) need the SQL side and are not
handled here.
"""

from __future__ import annotations

import json
import logging
import math
import re

from bastion.core.auth import otp
from bastion.core.auth.mfa import Challenge
from bastion.core.ports import Clock, Randomness
from bastion.core.state_machines._machine import Effect, Event
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    CodeChecked,
    CodeGenerated,
    CountAttempt,
    DropChallenge,
    GenerateCode,
    LoadChallenge,
    StoreChallenge,
    TakeChallenge,
)
from bastion.storage import StorageUnavailable
from bastion.storage.memory import MemoryStore

__all__ = ["CHALLENGE_EFFECTS", "ChallengeStore"]

log = logging.getLogger("bastion.auth")

CHALLENGE_EFFECTS = (
    GenerateCode,
    CheckCode,
    LoadChallenge,
    StoreChallenge,
    TakeChallenge,
    DropChallenge,
    CountAttempt,
)

#: what a challenge id (an ``mfa`` cookie value) may look like before it names a key
_ID = re.compile(r"\A[A-Za-z0-9-]{1,64}\Z")


def _challenge_key(challenge_id: str) -> str:
    return f"mfa_challenge:{challenge_id}"


def _attempts_key(challenge_id: str) -> str:
    return f"mfa_attempts:{challenge_id}"


def guesses_key(user_id: str) -> str:
    """The user's second-factor guess budget (``otp.USER_GUESS_BUDGET`` per window)."""
    return f"mfa_guesses:{user_id}"


class ChallengeStore:
    def __init__(
        self, memory: MemoryStore, *, otp_key: bytes, randomness: Randomness, clock: Clock
    ) -> None:
        self._memory = memory
        self._key = otp_key
        self._randomness = randomness
        self._clock = clock

    async def execute(self, effect: Effect) -> Event | None:
        """Carry out one of :data:`CHALLENGE_EFFECTS`; the reply event, if it has one."""
        if isinstance(effect, GenerateCode):
            return self.generate_code(effect.challenge_id)
        if isinstance(effect, CheckCode):
            return CodeChecked(
                ok=otp.code_matches(self._key, effect.challenge_id, effect.code, effect.digest)
            )
        if isinstance(effect, LoadChallenge):
            return ChallengeLoaded(challenge=await self.load(effect.challenge_id))
        if isinstance(effect, StoreChallenge):
            await self.store(effect.challenge)
            return None
        if isinstance(effect, TakeChallenge):
            taken = await self.take(effect.challenge_id)
            if taken and effect.user_id:  # a right code: its budget attempt comes back
                await self._give_back_guess(effect.user_id)
            return ChallengeTaken(ok=taken)
        if isinstance(effect, DropChallenge):
            await self.drop(effect.challenge_id)
            return None
        if isinstance(effect, CountAttempt):
            attempts = await self.count_attempt(effect.challenge_id, effect.ttl)
            return AttemptCounted(
                attempts=attempts, user_attempts=await self.count_guess(effect.user_id)
            )
        raise TypeError(f"not a challenge effect: {type(effect).__name__}")

    async def _give_back_guess(self, user_id: str) -> None:
        """After the take, which spent the code: a memory store failing now must not fail
        the request (its retry would find the challenge gone; issue 27). The guess then
        stays counted until its window ends."""
        try:
            await self._memory.incr(guesses_key(user_id), -1)
        except StorageUnavailable as exc:
            log.warning("second-factor guess not given back: %s", exc)

    def generate_code(self, challenge_id: str) -> CodeGenerated:
        code = otp.new_code(self._randomness)
        return CodeGenerated(code=code, digest=otp.code_digest(self._key, challenge_id, code))

    async def store(self, challenge: Challenge) -> None:
        remaining = challenge.expires_at - self._clock.now()
        if remaining <= 0:
            return  # already over: storing it would only resurrect it
        data = json.dumps(challenge.to_dict()).encode()
        await self._memory.set(_challenge_key(challenge.id), data, ttl=remaining)

    async def load(self, challenge_id: str) -> Challenge | None:
        if not _ID.match(challenge_id):
            return None
        raw = await self._memory.get(_challenge_key(challenge_id))
        return None if raw is None else _decode(raw)

    async def take(self, challenge_id: str) -> bool:
        """Remove the challenge; True only for the one caller that removed it."""
        if not _ID.match(challenge_id):
            return False
        return await self._memory.take(_challenge_key(challenge_id)) is not None

    async def drop(self, challenge_id: str) -> None:
        if _ID.match(challenge_id):
            await self._memory.delete(_challenge_key(challenge_id), _attempts_key(challenge_id))

    async def count_attempt(self, challenge_id: str, ttl: int) -> int:
        if not _ID.match(challenge_id):
            raise ValueError("not a challenge id")
        lifetime = max(1, math.ceil(ttl))
        return await self._memory.incr(_attempts_key(challenge_id), ttl=lifetime)

    async def count_guess(self, user_id: str) -> int:
        """Reserve one guess of ``user_id``'s budget (given straight back past it: a
        refused code is not checked)."""
        if not user_id:
            return 1
        key = guesses_key(user_id)
        used = await self._memory.incr(key, ttl=otp.USER_GUESS_WINDOW)
        if used > otp.USER_GUESS_BUDGET:
            await self._memory.incr(key, -1)
        return used


def _decode(raw: bytes) -> Challenge | None:
    """A stored challenge; an unreadable one counts as none (never an error to the caller)."""
    try:
        return Challenge.from_dict(json.loads(raw))
    except (ValueError, TypeError, KeyError):
        return None
