"""Password login by email or phone number.

Rules / theory of operation
---------------------------
1. ``LoginRequested`` is checked without I/O: an identifier is required, its channel must
   be enabled. The user is loaded by email (else phone number).
2. The password is verified FIRST, before any decision that depends on the account
   (reference issue #458 fixed: nothing is sent, and nothing about the account is revealed,
   before the password matched). An unknown identifier or a passwordless account still
   costs a (dummy) hash verification, so timing does not tell accounts apart.
3. Every authentication failure, whatever its cause (unknown, revoked, wrong signup method,
   unverified identifier, wrong password), is ``Unauthenticated("invalid credentials")``;
   a wrong password on a real account is also audited as ``user.login_failed``.
4. Roles: requested roles must be held by the user; none requested means
   ``--default-roles`` (reference surprise 3, kept).
5. Second factor: once the password matched, the machine asks ``DecideSecondFactor``. The
   driver answers ``SecondFactorNotRequired`` (then tokens are issued) or
   ``SecondFactorRequired(method)``: the flow parks in ``SECOND_FACTOR_REQUIRED`` and hands
   over with ``StartChallenge``, whose ``ChallengeRequested`` starts the MFA flow. The
   method may be ``webauthn`` (the user's passkey, answered through ``webauthn_login_*``);
   ``passkey`` says the answer offers the passkey (``should_offer_webauthn_mfa_verify``).
   A phone login with a still unverified number is let through to that question only with
   ``--enable-phone-verification`` and SMS configured; its answer must then be a
   challenge (the SMS code proves the number), never tokens.
6. Success: session stored, cookie set, ``user.login`` webhook, audit, and
   ``{message: "Logged in successfully", access_token, id_token, ...}``.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.claims import DEFAULT_SCOPE, login_method_for
from bastion.core.auth.mfa import Method
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.roles import INVALID_ROLES, login_roles
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
    RehashPassword,
    Respond,
    SetSessionCookie,
    VerifyPasswordHash,
    WebhookEvent,
)
from bastion.core.state_machines.events import PasswordVerified, TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = [
    "DecideSecondFactor",
    "LoginMachine",
    "LoginRequested",
    "SecondFactorNotRequired",
    "SecondFactorRequired",
    "State",
    "challenge_after_login",
]

INVALID_CREDENTIALS = "invalid credentials"
IDENTIFIER_REQUIRED = "email or phone number is required"
BASIC_AUTH_DISABLED = "basic authentication is disabled for this instance"
MOBILE_BASIC_AUTH_DISABLED = "mobile basic authentication is disabled for this instance"
LOGGED_IN = "Logged in successfully"
MFA_LOCKED = (
    "your account's multi-factor authentication is locked; "
    "contact your administrator to regain access"
)


class State(enum.Enum):
    START = "start"
    #: waiting for ``UserLoaded``
    LOADING_USER = "loading_user"
    #: waiting for ``PasswordVerified``
    VERIFYING_PASSWORD = "verifying_password"
    #: password matched; waiting for the second-factor decision
    PASSWORD_VERIFIED = "password_verified"
    #: parked: the MFA flow takes over from here
    SECOND_FACTOR_REQUIRED = "second_factor_required"
    #: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoginRequested(Event):
    email: str | None = None
    phone_number: str | None = None
    password: str = dataclasses.field(repr=False)
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    #: OAuth authorize ``state`` to bind the login to, if any
    state: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactorNotRequired(Event):
    """Answer to ``DecideSecondFactor``: the password is enough, issue tokens."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SecondFactorRequired(Event):
    """Answer to ``DecideSecondFactor``: a second factor by ``method`` is needed. The login
    ends with :class:`~core.state_machines.handoff.StartChallenge`, which carries what the
    MFA flow needs to challenge the user and finish the login."""

    method: Method
    #: the codes the answer offers to set up instead (``should_offer_*_mfa_setup``)
    offers: tuple[Method, ...] = ()
    #: the user's passkey can finish the login (``should_offer_webauthn_mfa_verify``)
    passkey: bool = False


TABLE: Table[State] = {
    (State.START, LoginRequested): edge("_on_request", State.LOADING_USER, State.FAILED),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.VERIFYING_PASSWORD),
    (State.VERIFYING_PASSWORD, PasswordVerified): edge(
        "_on_password", State.PASSWORD_VERIFIED, State.FAILED
    ),
    (State.PASSWORD_VERIFIED, SecondFactorNotRequired): edge(
        "_on_no_second_factor", State.ISSUING_TOKENS, State.FAILED
    ),
    (State.PASSWORD_VERIFIED, SecondFactorRequired): edge(
        "_on_second_factor", State.SECOND_FACTOR_REQUIRED
    ),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DecideSecondFactor(Effect):
    """Does this login need a second factor? (answered by the MFA policy, issue 4)."""

    replies = (SecondFactorNotRequired, SecondFactorRequired)
    user: User
    login_method: str
    #: how the user identified: ``basic_auth`` (email) or ``mobile_basic_auth`` (phone)
    channel: SignupMethod


@dataclasses.dataclass(slots=True, kw_only=True)
class LoginContext:
    channel: SignupMethod | None = None
    requested_roles: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    user: User | None = None
    #: the phone number is unverified: only a challenge (an SMS code) may follow
    phone_unverified: bool = False


class LoginMachine(Machine[State]):
    FLOW = "login"
    STATES = State
    TABLE = TABLE
    CONTEXT = LoginContext
    EMITS = frozenset(
        {
            AuditRecord,
            DecideSecondFactor,
            EmitWebhook,
            Fail,
            IssueTokens,
            LoadUser,
            PersistSession,
            RehashPassword,
            Respond,
            SetSessionCookie,
            StartChallenge,
            VerifyPasswordHash,
        }
    )
    ctx: LoginContext

    def _on_request(self, event: LoginRequested) -> tuple[list[Effect], State]:
        email = normalise_email(event.email or "")
        phone = (event.phone_number or "").strip()
        if not email and not phone:
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        if email and not self.policy.enable_basic_authentication:
            return self._fail(FailedPrecondition, BASIC_AUTH_DISABLED)
        if not email and not self.policy.enable_mobile_basic_authentication:
            return self._fail(FailedPrecondition, MOBILE_BASIC_AUTH_DISABLED)
        self.ctx.channel = SignupMethod.BASIC_AUTH if email else SignupMethod.MOBILE_BASIC_AUTH
        self.ctx.requested_roles = event.roles
        self.ctx.scope = event.scope or DEFAULT_SCOPE
        self.ctx.oauth_state = event.state
        self._secret = event.password
        load = LoadUser(email=email) if email else LoadUser(phone_number=phone)
        return [load], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        password = self._need_secret()
        self.ctx.user = event.user
        stored = None if event.user is None else event.user.password_hash
        return [VerifyPasswordHash(password=password, password_hash=stored)], (
            State.VERIFYING_PASSWORD
        )

    def _on_password(self, event: PasswordVerified) -> tuple[list[Effect], State]:
        password, self._secret = self._need_secret(), None
        user, channel = self.ctx.user, self._require(self.ctx.channel)
        if user is None or not event.ok:
            if user is None:
                return self._fail(Unauthenticated, INVALID_CREDENTIALS)
            effects, state = self._fail(Unauthenticated, INVALID_CREDENTIALS)
            audit = AuditRecord(
                action=AuditAction.LOGIN_FAILED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            )
            return [audit, *effects], state
        by_email = channel is SignupMethod.BASIC_AUTH
        verified = user.email_verified if by_email else user.phone_number_verified
        provable = not by_email and self.policy.phone_verification_possible
        if user.is_revoked or not user.has_signup_method(channel) or not (verified or provable):
            return self._fail(Unauthenticated, INVALID_CREDENTIALS)
        if user.mfa_locked_at is not None:  # lock_mfa; only after the password matched
            return self._fail(FailedPrecondition, MFA_LOCKED)
        self.ctx.phone_unverified = not verified
        roles = login_roles(self.ctx.requested_roles, user.roles, self.policy)
        if roles is None:
            return self._fail(InvalidArgument, INVALID_ROLES)
        self.ctx.roles = roles
        decide = DecideSecondFactor(
            user=user, login_method=login_method_for(channel), channel=channel
        )
        if event.needs_rehash:
            return [RehashPassword(user_id=user.id, password=password), decide], (
                State.PASSWORD_VERIFIED
            )
        return [decide], State.PASSWORD_VERIFIED

    def _on_no_second_factor(self, event: SecondFactorNotRequired) -> tuple[list[Effect], State]:
        if self.ctx.phone_unverified:
            return self._fail(Unauthenticated, INVALID_CREDENTIALS)
        user, channel = self._require(self.ctx.user), self._require(self.ctx.channel)
        issue = issue_tokens(
            self._env.ids,
            user=user,
            roles=self.ctx.roles,
            scope=self.ctx.scope,
            login_method=login_method_for(channel),
            state=self.ctx.oauth_state,
        )
        return [issue], State.ISSUING_TOKENS

    def _on_second_factor(self, event: SecondFactorRequired) -> tuple[list[Effect], State]:
        request = challenge_after_login(self.ctx, event.method, event.offers, event.passkey)
        return [StartChallenge(request=request)], State.SECOND_FACTOR_REQUIRED

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        user, channel = self._require(self.ctx.user), self._require(self.ctx.channel)
        login_method = login_method_for(channel)
        return [
            *keep_session(user, login_method, event.tokens),
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=channel.value),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            Respond(result=AuthResponse.with_tokens(LOGGED_IN, user, event.tokens)),
        ], State.DONE


def challenge_after_login(
    login: LoginContext, method: Method, offers: tuple[Method, ...] = (), passkey: bool = False
) -> ChallengeRequested:
    """The challenge that finishes a login parked in SECOND_FACTOR_REQUIRED; ``offers``: the
    codes its answer offers to set up instead; ``passkey``: the user's passkey can finish it."""
    if login.user is None or login.channel is None:
        raise ValueError("the login has not verified a password yet")
    return ChallengeRequested(
        user=login.user,
        method=method,
        channel=login.channel,
        roles=login.roles,
        scope=login.scope,
        state=login.oauth_state,
        offers=offers,
        passkey=passkey,
    )
