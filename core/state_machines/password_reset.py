"""Password reset by emailed link: ``forgot_password`` then ``reset_password``.

Rules / theory of operation
---------------------------
forgot_password
  1. An identifier is required. Reset by phone (SMS one-time password) belongs to the OTP
     flows and is refused here with "SMS service not enabled". By email, basic
     authentication must be enabled and mail configured: the flow sends or errors.
  2. Unknown and revoked accounts get the same answer as real ones and nothing is sent.
  3. Otherwise a ``forgot_password`` verification request is stored and its link mailed to
     ``<redirect>?token=...`` where redirect is the request's ``redirect_uri``, else
     ``--reset-password-url``, else ``<url>/app/reset-password``.
reset_password
  4. A token (or an OTP, which the OTP flows handle) is required. The token must name a
     stored ``forgot_password`` or ``invite_member`` request with valid claims, else
     InvalidArgument "invalid token"; only then are the passwords compared ("passwords
     don't match") and the policy applied, as the reference orders it.
  5. The new hash is written with ``basic_auth`` added and the email marked verified (the
     link proved it), the request is deleted, and then EVERY session of the user ends
     (reference surprise 8 fixed): commit SQL first, then drop sessions.
"""

from __future__ import annotations

import dataclasses
import enum

from core.auth.claims import claims_are_valid
from core.auth.emails import EmailEvent
from core.auth.links import emailed_link, reset_password_redirect
from core.auth.passwords import password_problem
from core.auth.responses import ForgotPasswordResponse, MessageResponse
from core.auth.user import SignupMethod, User, is_valid_email, normalise_email
from core.auth.verification import VerificationRequest
from core.errors import FailedPrecondition, InvalidArgument
from core.state_machines._machine import Effect, Event, Machine, Table, edge
from core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateVerificationRequest,
    DeleteUserSessions,
    DeleteVerificationRequest,
    HashPassword,
    LoadUser,
    LoadVerificationRequest,
    Respond,
    SendEmail,
    UpdateUser,
)
from core.state_machines.events import (
    PasswordHashed,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from core.state_machines.login import BASIC_AUTH_DISABLED, IDENTIFIER_REQUIRED
from core.state_machines.signup import INVALID_EMAIL
from core.state_machines.verification import EMAIL_SERVICE_DISABLED

__all__ = ["ForgotPasswordRequested", "PasswordResetMachine", "ResetPasswordRequested", "State"]

SMS_DISABLED = "SMS service not enabled"
RESET_LINK_SENT = (
    "If an account exists for this email, a password reset link has been sent. Please check "
    "your inbox. If you don't receive it within a few minutes, double-check the email "
    "address for typos."
)
TOKEN_OR_OTP_REQUIRED = "token or otp is required"
PHONE_REQUIRED = "phone number is required"
INVALID_TOKEN = "invalid token"
PASSWORDS_DIFFER = "passwords don't match"
PASSWORD_UPDATED = "Password updated successfully."
#: links that may set a password
SETS_PASSWORD = (EmailEvent.FORGOT_PASSWORD, EmailEvent.INVITE_MEMBER)


class State(enum.Enum):
    START = "start"
    #: forgot: waiting for the user
    FORGOT_LOADING_USER = "forgot_loading_user"
    #: forgot: waiting for the stored request's token
    CREATING_REQUEST = "creating_request"
    #: reset: waiting for the request behind the token
    RESET_LOADING_REQUEST = "reset_loading_request"
    #: reset: waiting for the user the request names
    RESET_LOADING_USER = "reset_loading_user"
    #: reset: waiting for the new hash
    HASHING = "hashing"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ForgotPasswordRequested(Event):
    email: str | None = None
    phone_number: str | None = None
    state: str | None = None
    redirect_uri: str | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ResetPasswordRequested(Event):
    token: str | None = dataclasses.field(default=None, repr=False)
    otp: str | None = dataclasses.field(default=None, repr=False)
    phone_number: str | None = None
    password: str = dataclasses.field(repr=False)
    confirm_password: str = dataclasses.field(repr=False)


TABLE: Table[State] = {
    (State.START, ForgotPasswordRequested): edge(
        "_on_forgot", State.FORGOT_LOADING_USER, State.FAILED
    ),
    (State.FORGOT_LOADING_USER, UserLoaded): edge(
        "_on_forgot_user", State.CREATING_REQUEST, State.DONE
    ),
    (State.CREATING_REQUEST, VerificationRequestCreated): edge("_on_link", State.DONE),
    (State.START, ResetPasswordRequested): edge(
        "_on_reset", State.RESET_LOADING_REQUEST, State.FAILED
    ),
    (State.RESET_LOADING_REQUEST, VerificationRequestLoaded): edge(
        "_on_request", State.RESET_LOADING_USER, State.FAILED
    ),
    (State.RESET_LOADING_USER, UserLoaded): edge("_on_reset_user", State.HASHING, State.FAILED),
    (State.HASHING, PasswordHashed): edge("_on_hashed", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class PasswordResetContext:
    redirect_uri: str | None = None
    user: User | None = None
    request: VerificationRequest | None = None
    #: what is wrong with the new password, reported once the token proved valid
    password_problem: str | None = None


class PasswordResetMachine(Machine[State]):
    FLOW = "password_reset"
    STATES = State
    TABLE = TABLE
    CONTEXT = PasswordResetContext
    ctx: PasswordResetContext

    # -- forgot_password ------------------------------------------------------------------

    def _on_forgot(self, event: ForgotPasswordRequested) -> tuple[list[Effect], State]:
        email = normalise_email(event.email or "")
        phone = (event.phone_number or "").strip()
        if not email and not phone:
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        if not email:
            return self._fail(FailedPrecondition, SMS_DISABLED)
        if not self.policy.enable_basic_authentication:
            return self._fail(FailedPrecondition, BASIC_AUTH_DISABLED)
        if not self.policy.email_enabled:
            return self._fail(FailedPrecondition, EMAIL_SERVICE_DISABLED)
        if not is_valid_email(email):
            return self._fail(InvalidArgument, INVALID_EMAIL)
        self.ctx.redirect_uri = reset_password_redirect(self.policy, event.redirect_uri)
        return [LoadUser(email=email)], State.FORGOT_LOADING_USER

    def _on_forgot_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user = event.user
        if user is None or user.is_revoked or user.email is None:
            return [self._link_sent()], State.DONE
        self.ctx.user = user
        now = self._env.now()
        request = CreateVerificationRequest(
            email=user.email,
            identifier=EmailEvent.FORGOT_PASSWORD,
            nonce=self._env.ids.new_id(),
            redirect_uri=self._require(self.ctx.redirect_uri),
            issued_at=now,
            expires_at=now + self.policy.verification_ttl,
        )
        return [request], State.CREATING_REQUEST

    def _on_link(self, event: VerificationRequestCreated) -> tuple[list[Effect], State]:
        user = self._require(self.ctx.user)
        to = self._require(user.email)
        link = emailed_link(
            self.policy,
            EmailEvent.FORGOT_PASSWORD,
            event.token,
            self._require(self.ctx.redirect_uri),
        )
        return [
            SendEmail(event=EmailEvent.FORGOT_PASSWORD, to=to, user=user, verification_url=link),
            AuditRecord(
                action=AuditAction.FORGOT_PASSWORD_REQUESTED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            self._link_sent(),
        ], State.DONE

    @staticmethod
    def _link_sent() -> Respond:
        return Respond(result=ForgotPasswordResponse(message=RESET_LINK_SENT))

    # -- reset_password -------------------------------------------------------------------

    def _on_reset(self, event: ResetPasswordRequested) -> tuple[list[Effect], State]:
        if not event.token and not event.otp:
            return self._fail(InvalidArgument, TOKEN_OR_OTP_REQUIRED)
        if not event.token:
            if not (event.phone_number or "").strip():
                return self._fail(InvalidArgument, PHONE_REQUIRED)
            return self._fail(FailedPrecondition, SMS_DISABLED)
        if not self.policy.enable_basic_authentication:
            return self._fail(FailedPrecondition, BASIC_AUTH_DISABLED)
        if event.password != event.confirm_password:
            self.ctx.password_problem = PASSWORDS_DIFFER
        else:
            strong = self.policy.enable_strong_password
            self.ctx.password_problem = password_problem(event.password, strong=strong)
        self._secret = event.password
        return [LoadVerificationRequest(token=event.token)], State.RESET_LOADING_REQUEST

    def _on_request(self, event: VerificationRequestLoaded) -> tuple[list[Effect], State]:
        request, claims = event.request, event.claims
        valid = (
            request is not None
            and claims is not None
            and request.identifier in SETS_PASSWORD
            and claims_are_valid(
                claims,
                policy=self.policy,
                token_type=request.identifier,
                now=self._env.now(),
                subject=request.email,
                nonce=request.nonce,
            )
        )
        if not valid or request is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        if self.ctx.password_problem is not None:
            return self._fail(InvalidArgument, self.ctx.password_problem)
        self.ctx.request = request
        return [LoadUser(email=request.email)], State.RESET_LOADING_USER

    def _on_reset_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        if event.user is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        self.ctx.user = event.user
        return [HashPassword(password=self._need_secret())], State.HASHING

    def _on_hashed(self, event: PasswordHashed) -> tuple[list[Effect], State]:
        self._secret = None
        user, request = self._require(self.ctx.user), self._require(self.ctx.request)
        now = self._env.now()
        updated = dataclasses.replace(
            user.with_signup_method(SignupMethod.BASIC_AUTH),
            password_hash=event.password_hash,
            email_verified_at=user.email_verified_at or now,
            is_multi_factor_auth_enabled=True
            if self.policy.enforce_mfa
            else user.is_multi_factor_auth_enabled,
            updated_at=now,
        )
        return [
            UpdateUser(user=updated),
            DeleteVerificationRequest(request_id=request.id),
            DeleteUserSessions(user_id=user.id),
            AuditRecord(
                action=AuditAction.PASSWORD_RESET,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            Respond(result=MessageResponse(message=PASSWORD_UPDATED)),
        ], State.DONE
