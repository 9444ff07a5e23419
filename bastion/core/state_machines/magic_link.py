"""Passwordless login: ``magic_link_login`` emails a one-use sign-in link.

Rules / theory of operation
---------------------------
1. Magic link login must be enabled, and mail must be configured: the flow either sends
   the link or fails with an error (reference surprise 14 fixed: never a silent success).
2. An unknown email creates an account (if signup is enabled) with signup method
   ``magic_link_login`` and the requested roles (configured, not protected; else the
   defaults), under the per-identity lock, its ``user.created`` event in the same
   commit as its row (a failure after it leaves no account unannounced). If someone else
   creates it first, the flow simply loads that account and continues.
3. A known account gains ``magic_link_login`` and any requested configured role it lacks,
   never a protected one ("invalid roles").
4. A revoked account gets the same answer as everyone, and nothing is sent.
5. The link goes to ``/verify_email`` (the verification flow signs the user in); its
   redirect carries the requested ``roles``, ``scope`` and ``state``. The answer is the same
   vague sentence whether or not an account existed.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import add_query, default_redirect, verify_email_link
from bastion.core.auth.responses import MessageResponse
from bastion.core.auth.roles import INVALID_ROLES, magic_link_roles
from bastion.core.auth.user import (
    SignupMethod,
    User,
    identity_lock_key,
    is_valid_email,
    normalise_email,
)
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateUser,
    CreateVerificationRequest,
    EmitWebhook,
    Fail,
    LoadUser,
    Respond,
    SendEmail,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
    VerificationRequestCreated,
)
from bastion.core.state_machines.signup import INVALID_EMAIL, SIGNUP_DISABLED
from bastion.core.state_machines.verification import EMAIL_SERVICE_DISABLED

__all__ = ["MagicLinkMachine", "MagicLinkRequested", "State"]

MAGIC_LINK_DISABLED = "magic link login is disabled for this instance"
LINK_SENT = (
    "If an account exists for this email, a magic link has been sent. Please check your "
    "inbox. If you don't receive it within a few minutes, double-check the email address "
    "for typos."
)


class State(enum.Enum):
    START = "start"
    #: waiting for ``UserLoaded``
    LOADING_USER = "loading_user"
    #: waiting for ``UserCreated`` / ``UserAlreadyExists``
    CREATING_USER = "creating_user"
    #: waiting for ``VerificationRequestCreated``
    CREATING_REQUEST = "creating_request"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MagicLinkRequested(Event):
    email: str
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    state: str | None = None
    redirect_uri: str | None = None


TABLE: Table[State] = {
    (State.START, MagicLinkRequested): edge("_on_request", State.LOADING_USER, State.FAILED),
    (State.LOADING_USER, UserLoaded): edge(
        "_on_user", State.CREATING_USER, State.CREATING_REQUEST, State.DONE, State.FAILED
    ),
    (State.CREATING_USER, UserCreated): edge("_on_created", State.CREATING_REQUEST),
    (State.CREATING_USER, UserAlreadyExists): edge("_on_taken", State.LOADING_USER),
    (State.CREATING_REQUEST, VerificationRequestCreated): edge("_on_link", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class MagicLinkContext:
    email: str = ""
    requested_roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    redirect_uri: str | None = None
    user: User | None = None


class MagicLinkMachine(Machine[State]):
    FLOW = "magic_link"
    STATES = State
    TABLE = TABLE
    CONTEXT = MagicLinkContext
    EMITS = frozenset(
        {
            AuditRecord,
            CreateUser,
            CreateVerificationRequest,
            EmitWebhook,
            Fail,
            LoadUser,
            Respond,
            SendEmail,
            UpdateUser,
        }
    )
    ctx: MagicLinkContext

    def _on_request(self, event: MagicLinkRequested) -> tuple[list[Effect], State]:
        email = normalise_email(event.email)
        if not self.policy.enable_magic_link_login:
            return self._fail(FailedPrecondition, MAGIC_LINK_DISABLED)
        if not self.policy.email_enabled:
            return self._fail(FailedPrecondition, EMAIL_SERVICE_DISABLED)
        if not is_valid_email(email):
            return self._fail(InvalidArgument, INVALID_EMAIL)
        self.ctx.email = email
        self.ctx.requested_roles = event.roles
        self.ctx.scope = event.scope or DEFAULT_SCOPE
        self.ctx.oauth_state = event.state
        self.ctx.redirect_uri = event.redirect_uri
        return [LoadUser(email=email)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user, policy = event.user, self.policy
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
                signup_methods=(SignupMethod.MAGIC_LINK_LOGIN.value,),
                roles=roles,
                created_at=now,
                updated_at=now,
                is_multi_factor_auth_enabled=True if policy.enforce_mfa else None,
            )
            lock = identity_lock_key(email=self.ctx.email)
            # Queued first, so the account's creation commits with its row: a failure
            # after it (the link, the mail) leaves an account that was announced.
            created = EmitWebhook(event=WebhookEvent.CREATED, user=new)
            return [created, CreateUser(user=new, lock_keys=(lock,))], State.CREATING_USER
        if user.is_revoked:
            return [self._answer()], State.DONE
        roles = magic_link_roles(self.ctx.requested_roles, user.roles, policy)
        if roles is None:
            return self._fail(InvalidArgument, INVALID_ROLES)
        updated = user.with_signup_method(SignupMethod.MAGIC_LINK_LOGIN)
        updated = dataclasses.replace(updated, roles=roles)
        effects: list[Effect] = []
        if updated != user:
            updated = dataclasses.replace(updated, updated_at=self._env.now())
            effects.append(UpdateUser(user=updated))
        self.ctx.user = updated
        return [*effects, self._link_request()], State.CREATING_REQUEST

    def _on_created(self, event: UserCreated) -> tuple[list[Effect], State]:
        self.ctx.user = event.user
        return [self._link_request()], State.CREATING_REQUEST

    def _on_taken(self, event: UserAlreadyExists) -> tuple[list[Effect], State]:
        return [LoadUser(email=self.ctx.email)], State.LOADING_USER

    def _on_link(self, event: VerificationRequestCreated) -> tuple[list[Effect], State]:
        user = self._require(self.ctx.user)
        link = verify_email_link(self.policy, event.token, self._redirect())
        effects: list[Effect] = [
            SendEmail(
                event=EmailEvent.MAGIC_LINK_LOGIN,
                to=self.ctx.email,
                user=user,
                verification_url=link,
            )
        ]
        effects.append(
            AuditRecord(
                action=AuditAction.MAGIC_LINK_REQUESTED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            )
        )
        return [*effects, self._answer()], State.DONE

    def _link_request(self) -> CreateVerificationRequest:
        now = self._env.now()
        return CreateVerificationRequest(
            email=self.ctx.email,
            identifier=EmailEvent.MAGIC_LINK_LOGIN,
            nonce=self._env.ids.new_id(),
            redirect_uri=self._redirect(),
            issued_at=now,
            expires_at=now + self.policy.verification_ttl,
        )

    def _redirect(self) -> str:
        base = self.ctx.redirect_uri or default_redirect(self.policy)
        return add_query(
            base,
            [
                ("roles", ",".join(self.ctx.requested_roles)),
                ("state", self.ctx.oauth_state or ""),
                ("scope", " ".join(self.ctx.scope)),
            ],
        )

    @staticmethod
    def _answer() -> Respond:
        return Respond(result=MessageResponse(message=LINK_SENT))
