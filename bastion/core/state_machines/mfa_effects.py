"""Effects and result events of the MFA flow (:mod:`core.state_machines.mfa`).

What the driver must guarantee, because the machine relies on it:

- ``TakeChallenge`` is ATOMIC (the memory store's ``take``): of two requests taking the
  same challenge, exactly one gets ``ChallengeTaken(ok=True)``. Taking the challenge is
  what consumes an emailed or texted code.
- ``CountAttempt`` is an atomic increment of a counter that lives as long as the
  challenge; it runs BEFORE the code is compared, so parallel guesses cannot outrun the
  limit.
- ``RecordTotpStep`` and ``UseRecoveryCode`` spend an authenticator or recovery code. They
  come with the flow's last writes and are committed in THEIR transaction, each as a
  compare-and-set: ``RecordTotpStep`` moves the stored ``last_used_step`` to ``step`` only
  if it is still below (and marks the authenticator verified, which completes an
  enrolment), ``UseRecoveryCode`` removes one digest only if it is still there. When the
  compare-and-set finds the code spent by another request, the driver aborts the whole
  transaction, drops the session the flow kept and answers InvalidArgument "invalid otp"
  (issue 27: nothing durable is written before a verify's last step).
- ``GenerateCode`` and ``EnrolAuthenticator`` draw from ``secrets`` (through
  :mod:`core.auth.otp` / :mod:`core.auth.totp`); the raw code and the new secret and
  recovery codes travel back once, are never stored in the clear, never logged.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import ClassVar

from bastion.core.auth.mfa import Challenge, Method
from bastion.core.auth.totp import Authenticator
from bastion.core.state_machines._machine import Effect, Event

__all__ = [
    "AttemptCounted",
    "AuthenticatorEnrolled",
    "AuthenticatorLoaded",
    "ChallengeLoaded",
    "ChallengeTaken",
    "CheckCode",
    "ClearMfaCookie",
    "CodeChecked",
    "CodeGenerated",
    "CountAttempt",
    "DropChallenge",
    "EnrolAuthenticator",
    "FactorsLoaded",
    "GenerateCode",
    "LoadAuthenticator",
    "LoadChallenge",
    "LoadFactors",
    "MfaOutcome",
    "RecordMfaOutcome",
    "RecordTotpStep",
    "SendSms",
    "SetMfaCookie",
    "StoreChallenge",
    "TakeChallenge",
    "UseRecoveryCode",
]


# -- events ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CodeGenerated(Event):
    """A fresh 6-digit code and its keyed digest (bound to the challenge id)."""

    code: str = dataclasses.field(repr=False)
    digest: str = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if not (self.code.isdigit() and len(self.code) == 6) or not self.digest:
            raise ValueError("a generated code is 6 digits with its digest")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CodeChecked(Event):
    ok: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChallengeLoaded(Event):
    """The stored challenge, ``None`` when there is none (never issued, expired, taken)."""

    challenge: Challenge | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChallengeTaken(Event):
    """``ok``: this request removed the challenge; ``False``: it was already gone."""

    ok: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AttemptCounted(Event):
    """How many codes have now been tried against the challenge, this one included, and
    (``user_attempts``) against the user's guess budget in its window."""

    attempts: int
    user_attempts: int = 1

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("an attempt count starts at 1")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticatorLoaded(Event):
    authenticator: Authenticator | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FactorsLoaded(Event):
    """What the user has set up besides the ``User`` row: a verified authenticator, a
    passkey."""

    verified_authenticator: bool
    passkey: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthenticatorEnrolled(Event):
    """A new, unverified authenticator was stored; its secret and recovery codes in the
    clear, to show once."""

    secret: str = dataclasses.field(repr=False)
    recovery_codes: tuple[str, ...] = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if not self.secret or not self.recovery_codes:
            raise ValueError("an enrolment needs a secret and recovery codes")


# -- effects that wait for a reply -----------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class GenerateCode(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (CodeGenerated,)
    challenge_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CheckCode(Effect):
    """Compare a submitted code with the challenge's digest (keyed, constant time)."""

    replies: ClassVar[tuple[type[Event], ...]] = (CodeChecked,)
    challenge_id: str
    code: str = dataclasses.field(repr=False)
    digest: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadChallenge(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (ChallengeLoaded,)
    challenge_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TakeChallenge(Effect):
    """Remove the challenge; ``user_id``'s guess-budget attempt is given back (right code)."""

    replies: ClassVar[tuple[type[Event], ...]] = (ChallengeTaken,)
    challenge_id: str
    user_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CountAttempt(Effect):
    """Increment the challenge's attempt counter (it expires after ``ttl`` s) and, with a
    ``user_id``, that user's guess budget (``otp.USER_GUESS_WINDOW``), atomically each."""

    replies: ClassVar[tuple[type[Event], ...]] = (AttemptCounted,)
    challenge_id: str
    ttl: int
    user_id: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadAuthenticator(Effect):
    """The user's authenticator with its secret decrypted, or ``None``."""

    replies: ClassVar[tuple[type[Event], ...]] = (AuthenticatorLoaded,)
    user_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadFactors(Effect):
    """Has the user a verified authenticator, a passkey?"""

    replies: ClassVar[tuple[type[Event], ...]] = (FactorsLoaded,)
    user_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EnrolAuthenticator(Effect):
    """Generate a secret and recovery codes; store them (secret sealed, codes digested)
    as the user's unverified authenticator, replacing an unverified one."""

    replies: ClassVar[tuple[type[Event], ...]] = (AuthenticatorEnrolled,)
    user_id: str


# -- fire-and-forget effects ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordTotpStep(Effect):
    """Spend an authenticator code, in the commit of the writes queued with it: set
    ``last_used_step`` to ``step`` and mark the authenticator verified, only if the stored
    step is still below ``step``; else abort that commit ("invalid otp")."""

    user_id: str
    step: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UseRecoveryCode(Effect):
    """Spend a recovery code, in the commit of the writes queued with it: remove its
    digest, only if it is still unused; else abort that commit ("invalid otp")."""

    user_id: str
    digest: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StoreChallenge(Effect):
    """Store the challenge under its id until it expires (``challenge.ttl`` from now)."""

    challenge: Challenge


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DropChallenge(Effect):
    challenge_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SetMfaCookie(Effect):
    """Set the ``mfa`` cookie (host and domain variants) with Max-Age ``max_age``."""

    value: str = dataclasses.field(repr=False)
    max_age: int

    def __post_init__(self) -> None:
        if self.max_age < 1:
            raise ValueError("the mfa cookie must live at least a second")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClearMfaCookie(Effect):
    """Expire the ``mfa`` cookies."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SendSms(Effect):
    """Queue a text message in the outbox (kind ``sms``)."""

    to: str
    body: str = dataclasses.field(repr=False)


class MfaOutcome(enum.StrEnum):
    ISSUED = "issued"
    PASSED = "passed"
    FAILED = "failed"
    #: the user's second-factor guess budget ran out (announced once per window)
    EXHAUSTED = "exhausted"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RecordMfaOutcome(Effect):
    """A challenge was issued, passed or failed, or the user's guess budget ran out:
    counted (a metric, never labelled by user) and announced to the webhooks registered for
    the ``user.mfa_*`` event."""

    user_id: str
    method: Method
    outcome: MfaOutcome
