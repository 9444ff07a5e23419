"""Email verification: ``verify_email`` (follow an emailed link) and ``resend_verify_email``.

Rules / theory of operation
---------------------------
verify_email
  1. The stored request is found by its token; the token's signature is checked by the
     driver, its claims here (issuer, audience, ``sub`` = the request's email, nonce and
     ``token_type`` = the request's identifier, not expired). Anything wrong is
     InvalidArgument "invalid verification token". Only links that prove an email address
     are accepted here (signup, magic link, email change); reset links are not.
  1a. Proving an address that was never verified clears a password set before, unless
     the link is a signup link followed from the browser that signed up (its signer
     cookie, event ``signer``: the account's user id): otherwise a stranger who signed up
     with someone else's address would keep a password into the owner's account. Every
     other credential ends with it (issue 36): passkeys, the authenticator, every other
     session (``DeleteUserSessions`` with ``end_credentials``, keeping the new session,
     in rule 3's final commit).
  2. A revoked user gets FailedPrecondition "user access has been revoked".
  3. Tokens are issued with ``login_method`` ``magic_link_login`` for a magic link,
     ``basic_auth`` otherwise, and the session kept (the memory store); only then, in ONE
     transaction, the email is marked verified, the request deleted (single use) and the
     webhooks and audit row queued (issue 27): the durable commit comes last, so a memory
     store that fails leaves the link unused and the identical retry signs in. Of two
     requests racing with one link, the one that finds it used drops the session it kept.
     Roles follow the login rule. A first verification completes a signup: webhooks
     ``user.signup`` + ``user.login``; later ones only ``user.login``.
resend_verify_email
  4. Mail must be configured (the flow either sends or errors). A malformed email is
     "invalid email", an identifier outside signup / reset / email change is
     "invalid identifier".
  5. Unknown users and emails with nothing pending get the same answer as a real resend,
     so the endpoint tells nothing about accounts. A real resend replaces the request (new
     nonce, same redirect) and mails the new link.
"""

from __future__ import annotations

import dataclasses
import enum
import hmac

from bastion.core.auth.claims import DEFAULT_SCOPE, link_request
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import emailed_link
from bastion.core.auth.mfa import without_devices
from bastion.core.auth.responses import AuthResponse, MessageResponse
from bastion.core.auth.roles import INVALID_ROLES, login_roles
from bastion.core.auth.user import (
    SignupMethod,
    User,
    is_valid_email,
    normalise_email,
)
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateVerificationRequest,
    DeleteUserSessions,
    DeleteVerificationRequest,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    LoadVerificationRequest,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import (
    TokensIssued,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = [
    "EMAIL_SERVICE_DISABLED",
    "ResendVerifyEmailRequested",
    "State",
    "VerificationMachine",
    "VerifyEmailRequested",
]

INVALID_TOKEN = "invalid verification token"
ACCESS_REVOKED = "user access has been revoked"
EMAIL_VERIFIED = "Email verified successfully."
EMAIL_SERVICE_DISABLED = "email service not enabled"
INVALID_EMAIL = "invalid email"
INVALID_IDENTIFIER = "invalid identifier"
RESENT = (
    "If a verification is pending for this email, a new link has been sent. Please check "
    "your inbox. If you don't receive it within a few minutes, double-check the email "
    "address for typos."
)
#: links whose use proves the address
PROVES_EMAIL = (EmailEvent.BASIC_AUTH_SIGNUP, EmailEvent.MAGIC_LINK_LOGIN, EmailEvent.UPDATE_EMAIL)
RESENDABLE = (EmailEvent.BASIC_AUTH_SIGNUP, EmailEvent.FORGOT_PASSWORD, EmailEvent.UPDATE_EMAIL)


class State(enum.Enum):
    START = "start"
    #: verify_email: waiting for the request behind the token
    LOADING_REQUEST = "loading_request"
    #: verify_email: waiting for the user the request names
    LOADING_USER = "loading_user"
    #: verify_email: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    #: resend: waiting for the user
    RESEND_LOADING_USER = "resend_loading_user"
    #: resend: waiting for the pending request
    RESEND_LOADING_REQUEST = "resend_loading_request"
    #: resend: waiting for the replacement request
    RESEND_CREATING_REQUEST = "resend_creating_request"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerifyEmailRequested(Event):
    token: str = dataclasses.field(repr=False)
    state: str | None = None
    #: the browser variant (``GET /verify_email``) may carry roles and scope
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    #: the user id that the caller's signer cookie names (its MAC checked by the
    #: service): this browser signed up for that account
    signer: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResendVerifyEmailRequested(Event):
    email: str
    identifier: str
    state: str | None = None


TABLE: Table[State] = {
    (State.START, VerifyEmailRequested): edge("_on_verify", State.LOADING_REQUEST),
    (State.LOADING_REQUEST, VerificationRequestLoaded): edge(
        "_on_request_loaded", State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.ISSUING_TOKENS, State.FAILED),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
    (State.START, ResendVerifyEmailRequested): edge(
        "_on_resend", State.RESEND_LOADING_USER, State.FAILED
    ),
    (State.RESEND_LOADING_USER, UserLoaded): edge(
        "_on_resend_user", State.RESEND_LOADING_REQUEST, State.DONE
    ),
    (State.RESEND_LOADING_REQUEST, VerificationRequestLoaded): edge(
        "_on_pending", State.RESEND_CREATING_REQUEST, State.DONE
    ),
    (State.RESEND_CREATING_REQUEST, VerificationRequestCreated): edge("_on_resent", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class VerificationContext:
    request: VerificationRequest | None = None
    user: User | None = None
    requested_roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    #: a first verification: the user row changes (the email verified)
    completes_signup: bool = False
    #: rule 1a: the link proved the address to a stranger: every other credential ends
    ends_credentials: bool = False
    login_method: str = SignupMethod.BASIC_AUTH.value
    #: resend: which kind of pending link to replace
    identifier: EmailEvent | None = None
    signer: str | None = None


class VerificationMachine(Machine[State]):
    FLOW = "verification"
    STATES = State
    TABLE = TABLE
    CONTEXT = VerificationContext
    EMITS = frozenset(
        {
            AuditRecord,
            CreateVerificationRequest,
            DeleteUserSessions,
            DeleteVerificationRequest,
            EmitWebhook,
            Fail,
            IssueTokens,
            LoadUser,
            LoadVerificationRequest,
            PersistSession,
            Respond,
            SendEmail,
            SetSessionCookie,
            UpdateUser,
        }
    )
    ctx: VerificationContext

    # -- verify_email ---------------------------------------------------------------------

    def _on_verify(self, event: VerifyEmailRequested) -> tuple[list[Effect], State]:
        self.ctx.requested_roles = event.roles
        self.ctx.scope = event.scope or DEFAULT_SCOPE
        self.ctx.oauth_state = event.state
        self.ctx.signer = event.signer
        return [LoadVerificationRequest(token=event.token)], State.LOADING_REQUEST

    def _on_request_loaded(self, event: VerificationRequestLoaded) -> tuple[list[Effect], State]:
        request = link_request(
            event.request,
            event.claims,
            purposes=PROVES_EMAIL,
            policy=self.policy,
            now=self._env.now(),
        )
        if request is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        self.ctx.request = request
        if request.identifier == EmailEvent.MAGIC_LINK_LOGIN:
            self.ctx.login_method = SignupMethod.MAGIC_LINK_LOGIN.value
        return [LoadUser(email=request.email)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        request, user = self._require(self.ctx.request), event.user
        if user is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        if user.is_revoked:
            return self._fail(FailedPrecondition, ACCESS_REVOKED)
        roles = login_roles(self.ctx.requested_roles, user.roles, self.policy)
        if roles is None:
            return self._fail(InvalidArgument, INVALID_ROLES)
        self.ctx.completes_signup = not user.email_verified
        if not user.email_verified:
            now = self._env.now()
            user = dataclasses.replace(user, email_verified_at=now, updated_at=now)
            if self._proves_a_strangers_password(request, user.id):
                # The link proves the address, not that its owner chose the password set
                # before: whoever signed up with it may be a stranger. The password goes
                # (the owner sets one later by a reset), and every other credential.
                user = dataclasses.replace(without_devices(user), password_hash=None)
                self.ctx.ends_credentials = True
        self.ctx.user = user
        issue = issue_tokens(
            self._env.ids,
            user=user,
            roles=roles,
            scope=self.ctx.scope,
            login_method=self.ctx.login_method,
            state=self.ctx.oauth_state,
        )
        return [issue], State.ISSUING_TOKENS

    def _proves_a_strangers_password(self, request: VerificationRequest, user_id: str) -> bool:
        """Whether following this link would hand the address to a password its owner may
        not have chosen: a magic link always (it proves the address to whoever asked for
        it), a signup link unless the browser that signed up follows it. An email change
        was asked for by the signed-in account holder, whose password it is."""
        if request.identifier == EmailEvent.MAGIC_LINK_LOGIN:
            return True
        if request.identifier != EmailEvent.BASIC_AUTH_SIGNUP:
            return False
        signer = self.ctx.signer
        return signer is None or not hmac.compare_digest(signer, user_id)

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        """The session first, then the user row, the spent link, the webhooks and the
        audit row, committed together (rule 3)."""
        user, method = self._require(self.ctx.user), self.ctx.login_method
        request = self._require(self.ctx.request)
        events = [WebhookEvent.LOGIN]
        if self.ctx.completes_signup:
            events.insert(0, WebhookEvent.SIGNUP)
        webhooks = [EmitWebhook(event=e, user=user, auth_recipe=method) for e in events]
        update: list[Effect] = [UpdateUser(user=user)] if self.ctx.completes_signup else []
        ended: list[Effect] = []
        if self.ctx.ends_credentials:  # rule 1a, committed with the rest
            ended.append(
                DeleteUserSessions(
                    user_id=user.id, end_credentials=True, keep_nonce=event.tokens.nonce
                )
            )
        return [
            *keep_session(user, method, event.tokens),
            *update,
            DeleteVerificationRequest(request_id=request.id),
            *webhooks,
            AuditRecord(
                action=AuditAction.EMAIL_VERIFIED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            *ended,
            Respond(result=AuthResponse.with_tokens(EMAIL_VERIFIED, user, event.tokens)),
        ], State.DONE

    # -- resend_verify_email --------------------------------------------------------------

    def _on_resend(self, event: ResendVerifyEmailRequested) -> tuple[list[Effect], State]:
        email = normalise_email(event.email)
        if not self.policy.email_enabled:
            return self._fail(FailedPrecondition, EMAIL_SERVICE_DISABLED)
        if not is_valid_email(email):
            return self._fail(InvalidArgument, INVALID_EMAIL)
        if event.identifier not in RESENDABLE:
            return self._fail(InvalidArgument, INVALID_IDENTIFIER)
        self.ctx.oauth_state = event.state
        self.ctx.identifier = EmailEvent(event.identifier)
        return [LoadUser(email=email)], State.RESEND_LOADING_USER

    def _on_resend_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        if event.user is None or event.user.email is None:
            return [self._resent()], State.DONE
        self.ctx.user = event.user
        identifier = self._require(self.ctx.identifier)
        load = LoadVerificationRequest(email=event.user.email, identifier=identifier)
        return [load], State.RESEND_LOADING_REQUEST

    def _on_pending(self, event: VerificationRequestLoaded) -> tuple[list[Effect], State]:
        old = event.request
        if old is None:
            return [self._resent()], State.DONE
        self.ctx.request = old
        now = self._env.now()
        return [
            DeleteVerificationRequest(request_id=old.id),
            CreateVerificationRequest(
                email=old.email,
                identifier=EmailEvent(old.identifier),
                nonce=self._env.ids.new_id(),
                redirect_uri=old.redirect_uri,
                issued_at=now,
                expires_at=now + self.policy.verification_ttl,
            ),
        ], State.RESEND_CREATING_REQUEST

    def _on_resent(self, event: VerificationRequestCreated) -> tuple[list[Effect], State]:
        old, user = self._require(self.ctx.request), self._require(self.ctx.user)
        identifier = EmailEvent(old.identifier)
        url = emailed_link(self.policy, identifier, event.token, old.redirect_uri)
        return [
            SendEmail(event=identifier, to=old.email, user=user, verification_url=url),
            AuditRecord(
                action=AuditAction.VERIFY_EMAIL_RESENT,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            self._resent(),
        ], State.DONE

    @staticmethod
    def _resent() -> Respond:
        return Respond(result=MessageResponse(message=RESENT))
