"""What every part of the MFA flow shares: its states, the requests that start a verify or a
resend, the context, and rule 3's check of a stored challenge. The rules and the machine
are :mod:`core.state_machines.mfa`.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.mfa import Challenge, Method, Purpose
from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User, normalise_email
from bastion.core.state_machines._machine import SECRET, Event, Machine

__all__ = [
    "INVALID_SESSION",
    "MfaContext",
    "MfaFlow",
    "ResendOtpRequested",
    "State",
    "VerifyOtpRequested",
]

INVALID_SESSION = "invalid session"


class State(enum.Enum):
    START = "start"
    #: issue: waiting for the user's authenticator
    ISSUE_LOADING_AUTHENTICATOR = "issue_loading_authenticator"
    #: issue: waiting for a new secret and recovery codes
    ENROLLING = "enrolling"
    #: issue or resend: waiting for a fresh code
    GENERATING_CODE = "generating_code"
    #: verify: waiting for the stored challenge
    LOADING_CHALLENGE = "loading_challenge"
    #: verify: waiting for the attempt count
    COUNTING_ATTEMPT = "counting_attempt"
    #: verify: waiting for the email/SMS code comparison
    CHECKING_CODE = "checking_code"
    #: verify: waiting for the user's authenticator
    LOADING_AUTHENTICATOR = "loading_authenticator"
    #: verify: waiting for the user
    LOADING_USER = "loading_user"
    #: verify: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    #: verify: the session kept, waiting for the atomic take of the challenge
    TAKING_CHALLENGE = "taking_challenge"
    #: resend: waiting for the stored challenge
    RESEND_LOADING_CHALLENGE = "resend_loading_challenge"
    #: resend: waiting for the atomic take of the old challenge
    RESEND_TAKING_CHALLENGE = "resend_taking_challenge"
    #: resend: waiting for the user
    RESEND_LOADING_USER = "resend_loading_user"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerifyOtpRequested(Event):
    #: the ``mfa`` cookie, ``None`` when absent
    challenge_id: str | None
    code: str = dataclasses.field(repr=False)
    is_totp: bool = False
    email: str | None = None
    phone_number: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResendOtpRequested(Event):
    challenge_id: str | None
    email: str | None = None
    phone_number: str | None = None


@dataclasses.dataclass(slots=True, kw_only=True)
class MfaContext:
    #: the challenge being issued, checked or replaced
    challenge: Challenge | None = None
    user: User | None = None
    is_totp: bool = False
    attempts: int = 0
    resend: bool = False
    #: verify: the authenticator code's time step, spent in the final commit (rule 8)
    step: int | None = None
    #: verify: the recovery code's digest, spent in the final commit (rule 8)
    recovery_digest: str | None = dataclasses.field(default=None, repr=False, metadata=SECRET)
    #: the code proved a still unverified identifier (a signup completes)
    signup: bool = False
    #: the identifier the caller named (verify and resend must match the challenge's)
    email: str | None = None
    phone_number: str | None = None
    #: issue: the codes the answer offers to set up
    offers: tuple[Method, ...] = ()
    #: issue: the answer offers the user's passkey
    passkey: bool = False
    #: verify: passing this setup challenge enrolled its method
    enrolled: bool = False
    #: verify: the tokens of the session kept before the challenge is taken (never
    #: serialised: ``to_dict`` leaves secrets out)
    tokens: IssuedTokens | None = dataclasses.field(default=None, repr=False, metadata=SECRET)


class MfaFlow(Machine[State], partial=True):
    """The base of the MFA machine's parts (:mod:`core.state_machines.mfa_issue`,
    :mod:`core.state_machines.mfa_verify`): the context's type and rule 3."""

    ctx: MfaContext

    def _usable(self, challenge: Challenge, *, verify: bool) -> bool:
        """Rule 3: unexpired, for the identifier the caller names, and (for
        ``verify_otp``) not a password-reset code."""
        if challenge.expired(self._env.now()):
            return False
        if verify and challenge.purpose is Purpose.PASSWORD_RESET:
            return False
        email = normalise_email(self.ctx.email or "")
        phone = (self.ctx.phone_number or "").strip()
        return bool(
            (email and email == normalise_email(challenge.email or ""))
            or (phone and phone == (challenge.phone_number or "").strip())
        )
