"""Signup by email or phone number, with a password.

Rules / theory of operation
---------------------------
1. ``SignupRequested`` is validated without I/O, in the reference's order: identifier
   present, signup enabled, passwords equal, password policy, channel enabled, identifier
   well formed, roles allowed (configured and not protected; none asked = defaults).
2. The password is hashed, then ``CreateUser`` inserts the account under the per-identity
   lock(s), which is where a taken email or phone number shows up. Hashing always runs
   first, so "taken" and "created" cost the same time. A taken identifier is the vague
   InvalidArgument "signup failed. please check your credentials or try a different method".
3. Stores are written so that a failed request leaves nothing behind: without a
   verification step, the tokens are issued and the session kept (the memory store) BEFORE
   ``CreateUser``, whose transaction commits the user row together with the webhooks and
   the audit row queued before it; the durable commit comes last. A memory store that
   fails answers 503 with no account made, so the identical retry signs up; a taken
   identity drops the session kept for it.
4. With email verification asked for and mail configured, an email signup gets a
   ``basic_auth_signup`` verification link (the verification flow finishes it) and no
   tokens. Else, with phone verification asked for and SMS configured, a phone signup
   leaves the number unverified, sends ``user.created``, and parks in
   PHONE_VERIFICATION_REQUIRED, handing over with ``StartChallenge``: the MFA flow texts
   the code (``should_show_mobile_otp_screen``) and ``verify_otp`` finishes the signup.
   Otherwise identifiers count as verified and tokens are issued at once.
5. The signup response carries no ``id_token`` (reference surprise 2, kept); the tokens'
   ``login_method`` is ``basic_auth`` for email and phone alike (surprise 21, kept), while
   the webhooks' ``auth_recipe`` says ``mobile_basic_auth`` for a phone signup.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from bastion.core.auth.claims import DEFAULT_SCOPE, login_method_for
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import default_redirect, verify_email_link
from bastion.core.auth.mfa import Method, Purpose
from bastion.core.auth.passwords import password_problem
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.responses import AuthResponse, IssuedTokens
from bastion.core.auth.roles import INVALID_ROLES, signup_roles
from bastion.core.auth.user import (
    SignupMethod,
    User,
    identity_lock_keys,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.core.errors import BastionError, FailedPrecondition, InvalidArgument
from bastion.core.state_machines._machine import SECRET, Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    CreateVerificationRequest,
    DeleteSession,
    EmitWebhook,
    Fail,
    HashPassword,
    IssueTokens,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    VerificationRequestCreated,
)
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import (
    BASIC_AUTH_DISABLED,
    IDENTIFIER_REQUIRED,
    MOBILE_BASIC_AUTH_DISABLED,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = ["SignupMachine", "SignupRequested", "State", "challenge_after_signup"]

SIGNUP_DISABLED = "signup is disabled for this instance"
PASSWORDS_DIFFER = "password and confirm password does not match"
INVALID_EMAIL = "invalid email address"
INVALID_PHONE = "invalid phone number"
SIGNUP_FAILED = "signup failed. please check your credentials or try a different method"
VERIFICATION_SENT = "Verification email has been sent. Please check your inbox"
SIGNED_UP = "Signed up successfully."


class State(enum.Enum):
    START = "start"
    #: waiting for ``PasswordHashed``
    HASHING = "hashing"
    #: waiting for ``TokensIssued`` (no verification step: the session before the user)
    ISSUING_TOKENS = "issuing_tokens"
    #: waiting for ``UserCreated`` / ``UserAlreadyExists``
    CREATING_USER = "creating_user"
    #: waiting for ``VerificationRequestCreated``
    CREATING_VERIFICATION = "creating_verification"
    #: parked: the MFA flow texts the code that proves the phone number
    PHONE_VERIFICATION_REQUIRED = "phone_verification_required"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SignupRequested(Event):
    email: str | None = None
    phone_number: str | None = None
    password: str = dataclasses.field(repr=False)
    confirm_password: str = dataclasses.field(repr=False)
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    redirect_uri: str | None = None
    state: str | None = None
    given_name: str | None = None
    family_name: str | None = None
    middle_name: str | None = None
    nickname: str | None = None
    gender: str | None = None
    birthdate: str | None = None
    picture: str | None = None
    is_multi_factor_auth_enabled: bool | None = None
    app_data: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)


TABLE: Table[State] = {
    (State.START, SignupRequested): edge("_on_request", State.HASHING, State.FAILED),
    (State.HASHING, PasswordHashed): edge("_on_hashed", State.CREATING_USER, State.ISSUING_TOKENS),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.CREATING_USER),
    (State.CREATING_USER, UserCreated): edge(
        "_on_created",
        State.CREATING_VERIFICATION,
        State.PHONE_VERIFICATION_REQUIRED,
        State.DONE,
    ),
    (State.CREATING_USER, UserAlreadyExists): edge("_on_taken", State.FAILED),
    (State.CREATING_VERIFICATION, VerificationRequestCreated): edge("_on_verification", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class SignupContext:
    #: the account to create, before its password hash is known
    user: User | None = None
    method: SignupMethod | None = None
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    redirect_uri: str | None = None
    oauth_state: str | None = None
    needs_verification: bool = False
    #: the phone number must be proved by an SMS code before any token
    verify_phone: bool = False
    #: issued (and their session kept) before the user row, without a verification step
    tokens: IssuedTokens | None = dataclasses.field(default=None, repr=False, metadata=SECRET)


def _problem(
    event: SignupRequested, email: str, phone: str, policy: AuthPolicy
) -> tuple[type[BastionError], str] | None:
    """The first rule the request breaks, in the reference's order, or ``None``."""
    if not email and not phone:
        return InvalidArgument, IDENTIFIER_REQUIRED
    if not policy.enable_signup:
        return FailedPrecondition, SIGNUP_DISABLED
    if event.password != event.confirm_password:
        return InvalidArgument, PASSWORDS_DIFFER
    if message := password_problem(event.password, strong=policy.enable_strong_password):
        return InvalidArgument, message
    if email and not policy.enable_basic_authentication:
        return FailedPrecondition, BASIC_AUTH_DISABLED
    if phone and not policy.enable_mobile_basic_authentication:
        return FailedPrecondition, MOBILE_BASIC_AUTH_DISABLED
    if email and not is_valid_email(email):
        return InvalidArgument, INVALID_EMAIL
    if phone and not is_valid_phone_number(phone):
        return InvalidArgument, INVALID_PHONE
    return None


class SignupMachine(Machine[State]):
    FLOW = "signup"
    STATES = State
    TABLE = TABLE
    CONTEXT = SignupContext
    EMITS = frozenset(
        {
            AuditRecord,
            CreateUser,
            CreateVerificationRequest,
            DeleteSession,
            EmitWebhook,
            Fail,
            HashPassword,
            IssueTokens,
            PersistSession,
            Respond,
            SendEmail,
            SetSessionCookie,
            StartChallenge,
        }
    )
    ctx: SignupContext

    def _on_request(self, event: SignupRequested) -> tuple[list[Effect], State]:
        policy = self.policy
        email = normalise_email(event.email or "")
        phone = (event.phone_number or "").strip()
        problem = _problem(event, email, phone, policy)
        if problem is not None:
            return self._fail(*problem)
        roles = signup_roles(event.roles, policy)
        if roles is None:
            return self._fail(InvalidArgument, INVALID_ROLES)

        now = self._env.now()
        verify_email = bool(email) and policy.verification_possible
        prove_phone = bool(phone) and policy.phone_verification_possible
        self.ctx.method = SignupMethod.MOBILE_BASIC_AUTH if phone else SignupMethod.BASIC_AUTH
        self.ctx.user = User(
            id=self._env.ids.new_id(),
            email=email or None,
            email_verified_at=None if (not email or verify_email) else now,
            phone_number=phone or None,
            phone_number_verified_at=now if phone and not prove_phone else None,
            signup_methods=(self.ctx.method.value,),
            given_name=event.given_name,
            family_name=event.family_name,
            middle_name=event.middle_name,
            nickname=event.nickname,
            gender=event.gender,
            birthdate=event.birthdate,
            picture=event.picture,
            roles=roles,
            created_at=now,
            updated_at=now,
            is_multi_factor_auth_enabled=True
            if policy.enforce_mfa
            else event.is_multi_factor_auth_enabled,
            app_data=dict(event.app_data),
        )
        self.ctx.roles = roles
        self.ctx.scope = event.scope or DEFAULT_SCOPE
        self.ctx.redirect_uri = event.redirect_uri
        self.ctx.oauth_state = event.state
        self.ctx.needs_verification = verify_email
        # An emailed link proves the email first; the number is then proved at the first
        # phone login.
        self.ctx.verify_phone = prove_phone and not verify_email
        return [HashPassword(password=event.password)], State.HASHING

    def _on_hashed(self, event: PasswordHashed) -> tuple[list[Effect], State]:
        draft = self._require(self.ctx.user)
        user = self.ctx.user = dataclasses.replace(draft, password_hash=event.password_hash)
        if self.ctx.needs_verification or self.ctx.verify_phone:
            return [self._create(user)], State.CREATING_USER
        issue = issue_tokens(
            self._env.ids,
            user=user,
            roles=self.ctx.roles,
            scope=self.ctx.scope,
            login_method=login_method_for(self._require(self.ctx.method)),
            state=self.ctx.oauth_state,
        )
        return [issue], State.ISSUING_TOKENS

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        """The session first, then the user row with its webhooks and audit row."""
        user, method = self._require(self.ctx.user), self._require(self.ctx.method)
        self.ctx.tokens = event.tokens
        return [
            *keep_session(user, login_method_for(method), event.tokens),
            EmitWebhook(event=WebhookEvent.CREATED, user=user),
            EmitWebhook(event=WebhookEvent.SIGNUP, user=user, auth_recipe=method.value),
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=method.value),
            self._audit(user),
            self._create(user),
        ], State.CREATING_USER

    @staticmethod
    def _create(user: User) -> CreateUser:
        keys = identity_lock_keys(email=user.email, phone_number=user.phone_number)
        return CreateUser(user=user, lock_keys=keys)

    def _on_created(self, event: UserCreated) -> tuple[list[Effect], State]:
        user = self.ctx.user = event.user
        now = self._env.now()
        if self.ctx.tokens is not None:
            response = AuthResponse.with_tokens(
                SIGNED_UP, user, self.ctx.tokens, include_id_token=False
            )
            return [Respond(result=response)], State.DONE
        if self.ctx.needs_verification:
            request = CreateVerificationRequest(
                email=self._require(user.email),
                identifier=EmailEvent.BASIC_AUTH_SIGNUP,
                nonce=self._env.ids.new_id(),
                redirect_uri=self._redirect(),
                issued_at=now,
                expires_at=now + self.policy.verification_ttl,
            )
            return [request], State.CREATING_VERIFICATION
        handoff = StartChallenge(request=challenge_after_signup(self.ctx))
        return [EmitWebhook(event=WebhookEvent.CREATED, user=user), self._audit(user), handoff], (
            State.PHONE_VERIFICATION_REQUIRED
        )

    def _on_taken(self, event: UserAlreadyExists) -> tuple[list[Effect], State]:
        effects, state = self._fail(InvalidArgument, SIGNUP_FAILED)
        tokens = self.ctx.tokens
        if tokens is not None:  # the session kept for the account that was not made
            user, method = self._require(self.ctx.user), self._require(self.ctx.method)
            ended = DeleteSession(
                user_id=user.id, login_method=login_method_for(method), nonce=tokens.nonce
            )
            effects = [ended, *effects]
        return effects, state

    def _on_verification(self, event: VerificationRequestCreated) -> tuple[list[Effect], State]:
        user = self._require(self.ctx.user)
        link = verify_email_link(self.policy, event.token, self._redirect())
        return [
            SendEmail(
                event=EmailEvent.BASIC_AUTH_SIGNUP,
                to=self._require(user.email),
                user=user,
                verification_url=link,
            ),
            EmitWebhook(event=WebhookEvent.CREATED, user=user),
            self._audit(user),
            Respond(result=AuthResponse(message=VERIFICATION_SENT)),
        ], State.DONE

    def _redirect(self) -> str:
        return self.ctx.redirect_uri or default_redirect(self.policy)

    @staticmethod
    def _audit(user: User) -> AuditRecord:
        return AuditRecord(
            action=AuditAction.SIGNUP,
            actor_id=user.id,
            actor_email=user.email,
            resource_id=user.id,
        )


def challenge_after_signup(signup: SignupContext) -> ChallengeRequested:
    """The SMS code that proves the phone number of a signup parked in
    PHONE_VERIFICATION_REQUIRED."""
    if signup.user is None or not signup.verify_phone:
        raise ValueError("the signup has no phone number to prove")
    return ChallengeRequested(
        user=signup.user,
        method=Method.SMS_OTP,
        purpose=Purpose.SIGNUP,
        channel=SignupMethod.MOBILE_BASIC_AUTH,
        roles=signup.roles,
        scope=signup.scope,
        state=signup.oauth_state,
    )
