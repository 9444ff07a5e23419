"""MFA enrolment from a parked login: ``email_otp_mfa_setup``, ``sms_otp_mfa_setup``,
``totp_mfa_setup``, ``skip_mfa_setup`` and ``lock_mfa`` (Authorizer's newer API).

Rules / theory of operation
---------------------------
1. Every operation continues a password login parked for its second factor: the ``mfa``
   cookie names its challenge, which must be unexpired, a LOGIN challenge (never a signup's
   or a password reset's) and for the identifier the caller names; else Unauthenticated
   "invalid session" and nothing changes. The user must still exist and not be revoked; a
   user whose MFA is locked gets the lock's FailedPrecondition.
2. Setting up a code (email or SMS) needs that code to be sendable to this user; an
   authenticator needs ``--enable-totp-login``; else FailedPrecondition. The parked
   challenge is taken (so its code dies) and the flow parks in ``CHALLENGE_REQUIRED``,
   handing over with ``StartChallenge``: the MFA flow issues a challenge of the chosen
   method for the same login, marked ``setup``.
   Passing it (``verify_otp``) enrols the method: ``enrolled_mfa_methods``, audit row and
   webhook event ``user.mfa_enrolled``.
3. Skipping is refused while MFA is enforced or once a factor is set up (an enrolled
   method or a verified authenticator). Otherwise the challenge is taken,
   ``has_skipped_mfa_setup_at`` recorded and the login finishes with tokens, audited and
   announced as ``user.mfa_setup_skipped`` (and ``user.login``). Later logins of that user
   ask no second factor until one is set up or MFA becomes enforced.
4. Locking is for a user who can no longer pass the challenge: refused while a one-time
   code can still be sent to them. Otherwise the challenge is taken, ``mfa_locked_at``
   recorded, the ``mfa`` cookie cleared, audited and announced as ``user.mfa_locked``;
   every later login is refused after its password until an admin's ``reset_mfa``.
"""

from __future__ import annotations

import dataclasses
import enum

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
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    LoadAuthenticator,
    LoadChallenge,
    TakeChallenge,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = ["MfaSetupMachine", "MfaSetupRequested", "SetupKind", "State"]

INVALID_SESSION = "invalid session"
NOT_AVAILABLE = {
    Method.EMAIL_OTP: "email OTP is not available for this account",
    Method.SMS_OTP: "SMS OTP is not available for this account",
    Method.TOTP: "authenticator apps are not enabled",
}
SKIP_ENFORCED = "multi-factor authentication is enforced; its setup cannot be skipped"
SKIP_ENROLLED = "a second factor is already set up; use it to log in"
LOCK_HAS_FALLBACK = "a one-time code can still be sent; use it instead of locking"
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
    #: skip: is an authenticator verified?
    LOADING_AUTHENTICATOR = "loading_authenticator"
    TAKING_CHALLENGE = "taking_challenge"
    #: parked: the MFA flow issues the chosen method's challenge (``setup``)
    CHALLENGE_REQUIRED = "challenge_required"
    ISSUING_TOKENS = "issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MfaSetupRequested(Event):
    kind: SetupKind
    #: the ``mfa`` cookie, ``None`` when absent
    challenge_id: str | None
    email: str | None = None
    phone_number: str | None = None
    #: which factors this server offers (the flags)
    mfa: MfaPolicy


TABLE: Table[State] = {
    (State.START, MfaSetupRequested): edge("_on_request", State.LOADING_CHALLENGE, State.FAILED),
    (State.LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_challenge", State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge(
        "_on_user", State.TAKING_CHALLENGE, State.LOADING_AUTHENTICATOR, State.FAILED
    ),
    (State.LOADING_AUTHENTICATOR, AuthenticatorLoaded): edge(
        "_on_authenticator", State.TAKING_CHALLENGE, State.FAILED
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
            LoadAuthenticator,
            LoadChallenge,
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
        if not event.challenge_id:
            return self._fail(Unauthenticated, INVALID_SESSION)
        if not (event.email or "").strip() and not (event.phone_number or "").strip():
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        self.ctx.kind, self.ctx.email, self.ctx.phone_number = (
            event.kind,
            event.email,
            event.phone_number,
        )
        self._mfa = event.mfa
        return [LoadChallenge(challenge_id=event.challenge_id)], State.LOADING_CHALLENGE

    def _on_challenge(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        challenge = event.challenge
        if challenge is None or not self._usable(challenge):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.challenge = challenge
        return [LoadUser(user_id=challenge.user_id)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user, kind = event.user, self._require(self.ctx.kind)
        if user is None or user.is_revoked:
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
            return [LoadAuthenticator(user_id=user.id)], State.LOADING_AUTHENTICATOR
        if kind is SetupKind.LOCK and mfa.code_methods(user):
            return self._fail(FailedPrecondition, LOCK_HAS_FALLBACK)
        return self._take()

    def _on_authenticator(self, event: AuthenticatorLoaded) -> tuple[list[Effect], State]:
        if event.authenticator is not None and event.authenticator.verified:
            return self._fail(FailedPrecondition, SKIP_ENROLLED)
        return self._take()

    def _take(self) -> tuple[list[Effect], State]:
        challenge = self._require(self.ctx.challenge)
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
        email = normalise_email(self.ctx.email or "")
        phone = (self.ctx.phone_number or "").strip()
        return bool(
            (email and email == normalise_email(challenge.email or ""))
            or (phone and phone == (challenge.phone_number or "").strip())
        )
