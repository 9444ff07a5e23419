"""MFA enrolment from a parked login: ``email_otp_mfa_setup``, ``sms_otp_mfa_setup``,
``totp_mfa_setup``, ``skip_mfa_setup`` and ``lock_mfa`` (Authorizer's newer API).

Rules / theory of operation
---------------------------
1. Every operation continues a password login parked for its second factor (or, for the
   setups, rule 2b's signed-in session): the ``mfa`` cookie names its challenge, which
   must be unexpired, a LOGIN challenge (never a signup's or a password reset's) and for
   the identifier the caller names; else Unauthenticated
   "invalid session" and nothing changes. The user must still exist and not be revoked; a
   user whose MFA is locked gets the lock's FailedPrecondition.
2. Setting up a code (email or SMS) needs that code to be sendable to this user; an
   authenticator needs ``--enable-totp-login``; else FailedPrecondition. The parked
   challenge is taken (so its code dies) and the flow parks in ``CHALLENGE_REQUIRED``,
   handing over with ``StartChallenge``: the MFA flow issues a challenge of the chosen
   method for the same login, marked ``setup``.
   Passing it (``verify_otp``) enrols the method: ``enrolled_mfa_methods``, audit row and
   webhook event ``user.mfa_enrolled``.
2a. A parked login proves the password only (issue 36). So setting up is for a user with
   NO working second factor yet (``MfaPolicy.working_factors``: a verified authenticator,
   a passkey, a code set up or asked by MFA on or enforced); a user with one must pass it
   (FailedPrecondition :data:`SETUP_HAS_FACTOR`). The one exception proves the same as
   the parked login: setting up the very code the login asks (an emailed code for a login
   parked on an emailed code), whose setup challenge is that code again.
2b. Without an ``mfa`` cookie, a setup (not a skip or lock) continues the caller's
   signed-in session instead, for the identifier of its user (else "invalid session"):
   a user with a working second factor must have passed one for this session within
   ``FRESH_FACTOR_WINDOW`` (``verify_otp``; FailedPrecondition :data:`FRESH_FACTOR_NEEDED`),
   a user without one needs nothing more. Nothing is taken; the setup challenge is
   issued as in 2 and its ``verify_otp`` signs in again. This is how a user who already
   has a factor adds another.
3. Skipping is refused while MFA is enforced, once a method is enrolled, or while the user
   has a working second factor (rule 2a: a user with MFA on never skips). Otherwise the
   challenge is taken, ``has_skipped_mfa_setup_at`` recorded and the login finishes with
   tokens, audited and announced as ``user.mfa_setup_skipped`` (and ``user.login``). Later
   logins of that user ask no second factor until one is set up or MFA becomes enforced.
4. Locking is for a user who can no longer pass the challenge: refused while a one-time
   code can still be sent to them, and (rule 2a) while the user has a working second
   factor such as a passkey: a password alone never locks its owner out. Otherwise the
   challenge is taken, ``mfa_locked_at`` recorded, the ``mfa`` cookie cleared, audited and
   announced as ``user.mfa_locked``; every later login is refused after its password
   until an admin's ``reset_mfa``.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import Challenge, Method, MfaPolicy, Purpose
from bastion.core.auth.policy import FlowEnv
from bastion.core.auth.responses import AuthResponse, MessageResponse
from bastion.core.auth.user import SignupMethod, User, normalise_email
from bastion.core.errors import FailedPrecondition, InvalidArgument, Unauthenticated
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    SetSessionCookie,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import IDENTIFIER_REQUIRED, MFA_LOCKED
from bastion.core.state_machines.mfa_effects import (
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    FactorsLoaded,
    LoadChallenge,
    LoadFactors,
    TakeChallenge,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = ["MfaSetupMachine", "MfaSetupRequested", "SetupKind", "SignedIn", "State"]

INVALID_SESSION = "invalid session"
NOT_AVAILABLE = {
    Method.EMAIL_OTP: "email OTP is not available for this account",
    Method.SMS_OTP: "SMS OTP is not available for this account",
    Method.TOTP: "authenticator apps are not enabled",
}
SKIP_ENFORCED = "multi-factor authentication is enforced; its setup cannot be skipped"
SKIP_ENROLLED = "a second factor is already set up; use it to log in"
SETUP_HAS_FACTOR = (
    "a second factor is already set up; pass it to log in (a password alone cannot set up another)"
)
LOCK_HAS_FALLBACK = "a one-time code can still be sent; use it instead of locking"
LOCK_HAS_FACTOR = "a second factor is already set up; use it instead of locking"
FRESH_FACTOR_NEEDED = (
    "pass your second factor first (log in with it), then set up another within 5 minutes"
)
SKIPPED = "MFA setup skipped"
LOCKED = "multi-factor authentication locked; contact your administrator to regain access"


class SetupKind(enum.StrEnum):
    EMAIL_OTP = "email_otp"
    SMS_OTP = "sms_otp"
    TOTP = "totp"
    SKIP = "skip"
    LOCK = "lock"

    @property
    def method(self) -> Method | None:
        """The factor this operation sets up (``None`` for skip and lock)."""
        return {"email_otp": Method.EMAIL_OTP, "sms_otp": Method.SMS_OTP, "totp": Method.TOTP}.get(
            self.value
        )


class State(enum.Enum):
    START = "start"
    LOADING_CHALLENGE = "loading_challenge"
    LOADING_USER = "loading_user"
    #: which second factors the user has (rule 2a)
    LOADING_FACTORS = "loading_factors"
    TAKING_CHALLENGE = "taking_challenge"
    #: parked: the MFA flow issues the chosen method's challenge (``setup``)
    CHALLENGE_REQUIRED = "challenge_required"
    ISSUING_TOKENS = "issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SignedIn:
    """Rule 2b: the caller's session, when no ``mfa`` cookie came."""

    user_id: str
    roles: tuple[str, ...]
    #: a second factor completed this session recently (``verify_otp``)
    fresh_factor: bool


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MfaSetupRequested(Event):
    kind: SetupKind
    #: the ``mfa`` cookie, ``None`` when absent
    challenge_id: str | None
    signed_in: SignedIn | None = None
    email: str | None = None
    phone_number: str | None = None
    #: which factors this server offers (the flags)
    mfa: MfaPolicy


TABLE: Table[State] = {
    (State.START, MfaSetupRequested): edge(
        "_on_request", State.LOADING_CHALLENGE, State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_challenge", State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.LOADING_FACTORS, State.FAILED),
    (State.LOADING_FACTORS, FactorsLoaded): edge(
        "_on_factors", State.TAKING_CHALLENGE, State.CHALLENGE_REQUIRED, State.FAILED
    ),
    (State.TAKING_CHALLENGE, ChallengeTaken): edge(
        "_on_taken", State.CHALLENGE_REQUIRED, State.ISSUING_TOKENS, State.DONE, State.FAILED
    ),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class MfaSetupContext:
    kind: SetupKind | None = None
    email: str | None = None
    phone_number: str | None = None
    challenge: Challenge | None = None
    user: User | None = None
    signed_in: SignedIn | None = None


class MfaSetupMachine(Machine[State]):
    FLOW = "mfa_setup"
    STATES = State
    TABLE = TABLE
    CONTEXT = MfaSetupContext
    EMITS = frozenset(
        {
            AuditRecord,
            ClearMfaCookie,
            EmitWebhook,
            Fail,
            IssueTokens,
            LoadChallenge,
            LoadFactors,
            LoadUser,
            PersistSession,
            Respond,
            SetSessionCookie,
            StartChallenge,
            TakeChallenge,
            UpdateUser,
        }
    )
    ctx: MfaSetupContext

    def __init__(self, env: FlowEnv) -> None:
        super().__init__(env)
        self._mfa = MfaPolicy()

    def _on_request(self, event: MfaSetupRequested) -> tuple[list[Effect], State]:
        signed_in = event.signed_in if event.kind.method is not None else None
        if not event.challenge_id and signed_in is None:
            return self._fail(Unauthenticated, INVALID_SESSION)
        if not (event.email or "").strip() and not (event.phone_number or "").strip():
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        self.ctx.kind, self.ctx.email, self.ctx.phone_number = (
            event.kind,
            event.email,
            event.phone_number,
        )
        self._mfa = event.mfa
        if event.challenge_id:
            return [LoadChallenge(challenge_id=event.challenge_id)], State.LOADING_CHALLENGE
        self.ctx.signed_in = signed_in = self._require(signed_in)
        return [LoadUser(user_id=signed_in.user_id)], State.LOADING_USER

    def _on_challenge(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        challenge = event.challenge
        if challenge is None or not self._usable(challenge):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.challenge = challenge
        return [LoadUser(user_id=challenge.user_id)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user, kind = event.user, self._require(self.ctx.kind)
        if user is None or user.is_revoked or not self._names(user):
            return self._fail(Unauthenticated, INVALID_SESSION)
        if user.mfa_locked_at is not None:
            return self._fail(FailedPrecondition, MFA_LOCKED)
        self.ctx.user = user
        mfa = self._mfa
        method = kind.method
        if method is Method.TOTP and not mfa.enable_totp_login:
            return self._fail(FailedPrecondition, NOT_AVAILABLE[method])
        if method in (Method.EMAIL_OTP, Method.SMS_OTP) and method not in mfa.code_methods(user):
            return self._fail(FailedPrecondition, NOT_AVAILABLE[method])
        if kind is SetupKind.SKIP:
            if mfa.enforce_mfa:
                return self._fail(FailedPrecondition, SKIP_ENFORCED)
            if user.enrolled_mfa_methods:
                return self._fail(FailedPrecondition, SKIP_ENROLLED)
        if kind is SetupKind.LOCK and mfa.code_methods(user):
            return self._fail(FailedPrecondition, LOCK_HAS_FALLBACK)
        return [LoadFactors(user_id=user.id)], State.LOADING_FACTORS

    def _on_factors(self, event: FactorsLoaded) -> tuple[list[Effect], State]:
        """Rule 2a: with a working second factor, only the parked login's own code."""
        kind, user = self._require(self.ctx.kind), self._require(self.ctx.user)
        factors = self._mfa.working_factors(
            user, verified_authenticator=event.verified_authenticator, has_passkey=event.passkey
        )
        signed_in = self.ctx.signed_in
        if signed_in is not None:  # rule 2b
            if factors and not signed_in.fresh_factor:
                return self._fail(FailedPrecondition, FRESH_FACTOR_NEEDED)
            by_phone = not normalise_email(self.ctx.email or "")
            request = ChallengeRequested(
                user=user,
                method=self._require(kind.method),
                channel=SignupMethod.MOBILE_BASIC_AUTH if by_phone else SignupMethod.BASIC_AUTH,
                roles=signed_in.roles,
                scope=DEFAULT_SCOPE,
                setup=True,
            )
            return [StartChallenge(request=request)], State.CHALLENGE_REQUIRED
        challenge = self._require(self.ctx.challenge)
        if factors:
            if kind is SetupKind.SKIP:
                return self._fail(FailedPrecondition, SKIP_ENROLLED)
            if kind is SetupKind.LOCK:
                return self._fail(FailedPrecondition, LOCK_HAS_FACTOR)
            if kind.method is not challenge.method or challenge.enrolling:
                return self._fail(FailedPrecondition, SETUP_HAS_FACTOR)
        return [TakeChallenge(challenge_id=challenge.id)], State.TAKING_CHALLENGE

    def _on_taken(self, event: ChallengeTaken) -> tuple[list[Effect], State]:
        if not event.ok:
            return self._fail(Unauthenticated, INVALID_SESSION)
        kind, user, now = self._require(self.ctx.kind), self._require(self.ctx.user), self._now()
        challenge = self._require(self.ctx.challenge)
        if kind.method is not None:
            request = ChallengeRequested(
                user=user,
                method=kind.method,
                channel=SignupMethod(challenge.auth_recipe),
                roles=challenge.roles,
                scope=challenge.scope,
                state=challenge.oauth_state,
                setup=True,
            )
            return [StartChallenge(request=request)], State.CHALLENGE_REQUIRED
        if kind is SetupKind.SKIP:
            user = dataclasses.replace(user, has_skipped_mfa_setup_at=now, updated_at=now)
            self.ctx.user = user
            issue = issue_tokens(
                self._env.ids,
                user=user,
                roles=challenge.roles,
                scope=challenge.scope,
                login_method=challenge.login_method,
                state=challenge.oauth_state,
            )
            return [UpdateUser(user=user), issue], State.ISSUING_TOKENS
        user = dataclasses.replace(user, mfa_locked_at=now, updated_at=now)
        return [
            UpdateUser(user=user),
            ClearMfaCookie(),
            *self._announce(user, WebhookEvent.MFA_LOCKED, AuditAction.MFA_LOCKED),
            Respond(result=MessageResponse(message=LOCKED)),
        ], State.DONE

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        user, challenge = self._require(self.ctx.user), self._require(self.ctx.challenge)
        return [
            *keep_session(user, challenge.login_method, event.tokens),
            ClearMfaCookie(),
            *self._announce(user, WebhookEvent.MFA_SETUP_SKIPPED, AuditAction.MFA_SETUP_SKIPPED),
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=challenge.auth_recipe),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata={"mfa_setup": "skipped"},
            ),
            Respond(result=AuthResponse.with_tokens(SKIPPED, user, event.tokens)),
        ], State.DONE

    # -- shared -----------------------------------------------------------------------------

    def _announce(self, user: User, event: WebhookEvent, action: AuditAction) -> list[Effect]:
        recipe = self._require(self.ctx.challenge).method.value
        return [
            EmitWebhook(event=event, user=user, auth_recipe=recipe),
            AuditRecord(
                action=action,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata={"method": recipe},
            ),
        ]

    def _now(self) -> int:
        return self._env.now()

    def _usable(self, challenge: Challenge) -> bool:
        """Rule 1: an unexpired login challenge for the identifier the caller names."""
        if challenge.expired(self._now()) or challenge.purpose is not Purpose.LOGIN:
            return False
        return self._named(challenge.email, challenge.phone_number)

    def _names(self, user: User) -> bool:
        """Rule 2b: a signed-in setup names the session user's own identifier."""
        return self.ctx.signed_in is None or self._named(user.email, user.phone_number)

    def _named(self, email: str | None, phone_number: str | None) -> bool:
        """The caller named ``email`` (normalised) or ``phone_number``."""
        named_email = normalise_email(self.ctx.email or "")
        named_phone = (self.ctx.phone_number or "").strip()
        return bool(
            (named_email and named_email == normalise_email(email or ""))
            or (named_phone and named_phone == (phone_number or "").strip())
        )
