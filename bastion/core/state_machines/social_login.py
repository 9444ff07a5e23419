"""Social login's account step: a provider has vouched for a person, now sign them in.

Rules / theory of operation
---------------------------
The transport has already checked the callback (state bound to the browser, code
exchanged, ID token verified) and hands over the normalised provider profile.

1. Nothing is created or linked without an address the provider verified: no address,
   or an unverified one, is FailedPrecondition "the provider did not give a verified
   email address", whether or not an account with that address exists.
2. Unknown address: signup must be enabled; the account is created under the
   per-identity lock with the verified address, the provider in ``signup_methods``, the
   provider's names and picture, and the requested roles (configured, not protected;
   none asked = ``--default-roles``). Its signup (the ``user.signup`` event and audit
   row) commits with its row, so a failure after it (the session) leaves no account
   unannounced. If another request creates it first, the flow loads that account and
   links it instead.
3. Known address: a revoked account is refused. Otherwise the account gains the provider
   in ``signup_methods``, requested configured roles it lacks (never a protected one) and
   names or picture it has no value for. If OUR copy of the address was never verified,
   whoever set its password never proved the address: the password is dropped and the
   account's other sessions end (pre-hijacking defence), and the address becomes verified.
4. Tokens and session as for a password login, ``login_method`` = the provider; roles in
   the tokens are the requested ones, else ``--default-roles``. A new account fires
   ``user.signup`` then ``user.login``, a known one ``user.login`` (``auth_recipe`` = the
   provider); audit rows ``user.signup`` (new) and ``oauth.callback_success``.

Social logins are not asked for a second factor: the provider authenticated the person.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import without_devices
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.roles import INVALID_ROLES, magic_link_roles
from bastion.core.auth.user import User, identity_lock_key
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.social.profile import SocialProfile
from bastion.core.social.providers import Provider
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    DeleteUserSessions,
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
from bastion.core.state_machines.events import (
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session
from bastion.core.state_machines.signup import SIGNUP_DISABLED
from bastion.core.state_machines.verification import ACCESS_REVOKED

__all__ = ["NO_VERIFIED_EMAIL", "SocialLoginMachine", "SocialLoginRequested", "State"]

NO_VERIFIED_EMAIL = "the provider did not give a verified email address"
LOGGED_IN = "Logged in successfully"


class State(enum.Enum):
    START = "start"
    #: waiting for ``UserLoaded``
    LOADING_USER = "loading_user"
    #: waiting for ``UserCreated`` / ``UserAlreadyExists``
    CREATING_USER = "creating_user"
    #: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SocialLoginRequested(Event):
    provider: Provider
    profile: SocialProfile
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    #: the application's ``state`` (an authorize request's, once that flow binds codes)
    state: str | None = None


TABLE: Table[State] = {
    (State.START, SocialLoginRequested): edge("_on_request", State.LOADING_USER, State.FAILED),
    (State.LOADING_USER, UserLoaded): edge(
        "_on_user", State.CREATING_USER, State.ISSUING_TOKENS, State.FAILED
    ),
    (State.CREATING_USER, UserCreated): edge("_on_created", State.ISSUING_TOKENS),
    (State.CREATING_USER, UserAlreadyExists): edge("_on_taken", State.LOADING_USER),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class SocialLoginContext:
    provider: Provider | None = None
    email: str = ""
    given_name: str | None = None
    family_name: str | None = None
    nickname: str | None = None
    picture: str | None = None
    requested_roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    user: User | None = None


class SocialLoginMachine(Machine[State]):
    FLOW = "social_login"
    STATES = State
    TABLE = TABLE
    CONTEXT = SocialLoginContext
    EMITS = frozenset(
        {
            AuditRecord,
            CreateUser,
            DeleteUserSessions,
            EmitWebhook,
            Fail,
            IssueTokens,
            LoadUser,
            PersistSession,
            Respond,
            SetSessionCookie,
            UpdateUser,
        }
    )
    ctx: SocialLoginContext

    def _on_request(self, event: SocialLoginRequested) -> tuple[list[Effect], State]:
        email = event.profile.verified_email
        if email is None:
            return self._fail(FailedPrecondition, NO_VERIFIED_EMAIL)
        profile = event.profile
        self.ctx.provider = event.provider
        self.ctx.email = email
        self.ctx.given_name, self.ctx.family_name = profile.given_name, profile.family_name
        self.ctx.nickname, self.ctx.picture = profile.nickname, profile.picture
        self.ctx.requested_roles = event.roles
        self.ctx.scope = event.scope or DEFAULT_SCOPE
        self.ctx.oauth_state = event.state
        return [LoadUser(email=email)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user, policy = event.user, self.policy
        provider = self._require(self.ctx.provider)
        if user is None:
            if not policy.enable_signup:
                return self._fail(FailedPrecondition, SIGNUP_DISABLED)
            roles = magic_link_roles(self.ctx.requested_roles, None, policy)
            if roles is None:
                return self._fail(InvalidArgument, INVALID_ROLES)
            now = self._env.now()
            new = User(
                id=self._env.ids.new_id(),
                email=self.ctx.email,
                email_verified_at=now,
                signup_methods=(provider.value,),
                given_name=self.ctx.given_name,
                family_name=self.ctx.family_name,
                nickname=self.ctx.nickname,
                picture=self.ctx.picture,
                roles=roles,
                created_at=now,
                updated_at=now,
                is_multi_factor_auth_enabled=True if policy.enforce_mfa else None,
            )
            lock = identity_lock_key(email=self.ctx.email)
            signup: list[Effect] = [
                EmitWebhook(event=WebhookEvent.SIGNUP, user=new, auth_recipe=provider.value),
                AuditRecord(
                    action=AuditAction.SIGNUP,
                    actor_id=new.id,
                    actor_email=new.email,
                    resource_id=new.id,
                    metadata={"provider": provider.value},
                ),
            ]  # queued first: committed with the row (a taken identity drops them)
            return [*signup, CreateUser(user=new, lock_keys=(lock,))], State.CREATING_USER
        if user.is_revoked:
            return self._fail(FailedPrecondition, ACCESS_REVOKED)
        roles = magic_link_roles(self.ctx.requested_roles, user.roles, policy)
        if roles is None:
            return self._fail(InvalidArgument, INVALID_ROLES)
        linked = self._linked(user, provider, roles)
        if not user.email_verified:  # the provider proved it: nothing left before stays
            linked = without_devices(linked)
        effects: list[Effect] = []
        if linked != user:
            effects.append(UpdateUser(user=dataclasses.replace(linked, updated_at=self._env.now())))
        if not user.email_verified:
            effects.append(DeleteUserSessions(user_id=user.id, end_credentials=True))
        self.ctx.user = linked
        return [*effects, self._issue(linked)], State.ISSUING_TOKENS

    def _linked(self, user: User, provider: Provider, roles: tuple[str, ...]) -> User:
        methods = user.signup_methods
        if provider.value not in methods:
            methods = (*methods, provider.value)
        linked = dataclasses.replace(
            user,
            signup_methods=methods,
            roles=roles,
            given_name=user.given_name or self.ctx.given_name,
            family_name=user.family_name or self.ctx.family_name,
            nickname=user.nickname or self.ctx.nickname,
            picture=user.picture or self.ctx.picture,
        )
        if not user.email_verified:
            linked = dataclasses.replace(
                linked, email_verified_at=self._env.now(), password_hash=None
            )
        return linked

    def _on_created(self, event: UserCreated) -> tuple[list[Effect], State]:
        self.ctx.user = event.user
        return [self._issue(event.user)], State.ISSUING_TOKENS

    def _on_taken(self, event: UserAlreadyExists) -> tuple[list[Effect], State]:
        return [LoadUser(email=self.ctx.email)], State.LOADING_USER

    def _issue(self, user: User) -> IssueTokens:
        provider = self._require(self.ctx.provider)
        return issue_tokens(
            self._env.ids,
            user=user,
            roles=self.ctx.requested_roles or self.policy.default_roles,
            scope=self.ctx.scope,
            login_method=provider.value,
            state=self.ctx.oauth_state,
        )

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        user, provider = self._require(self.ctx.user), self._require(self.ctx.provider)
        method = provider.value
        return [
            *keep_session(user, method, event.tokens),
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=method),
            AuditRecord(
                action=AuditAction.OAUTH_CALLBACK_SUCCESS,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata={"provider": method},
            ),
            Respond(result=AuthResponse.with_tokens(LOGGED_IN, user, event.tokens)),
        ], State.DONE
