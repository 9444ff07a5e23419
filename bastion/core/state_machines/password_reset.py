"""Password reset: ``forgot_password`` then ``reset_password``, by emailed link or SMS code.

Rules / theory of operation
---------------------------
forgot_password
  1. An identifier is required. By email, basic authentication must be enabled and mail
     configured; by phone, mobile basic authentication and SMS: the flow sends or errors.
  2. Unknown and revoked accounts get the same answer as real ones and nothing is sent
     (by phone also an ``mfa`` cookie of the same shape, naming no challenge).
  3. By email, a ``forgot_password`` verification request is stored and its link mailed to
     ``<redirect>?token=...`` where redirect is the request's ``redirect_uri``, else
     ``--reset-password-url``, else ``<url>/app/reset-password``.
  3b. By phone, the flow parks in SMS_CODE_REQUIRED and hands over (``StartChallenge``):
     the MFA flow texts a code under a ``password_reset`` challenge (``mfa`` cookie) and
     answers ``should_show_mobile_otp_screen``; ``verify_otp`` never accepts that code.
reset_password
  4. A token or an OTP is required. The token must name a stored ``forgot_password`` or
     ``invite_member`` request with valid claims, else InvalidArgument "invalid token";
     only then are the passwords compared ("passwords don't match") and the policy
     applied, as the reference orders it.
  4b. An OTP needs ``phone_number`` and the ``mfa`` cookie. As in ``verify_otp``: the
     challenge is checked first (a ``password_reset`` one for that number, unexpired,
     else Unauthenticated "invalid session", nothing consumed), then one attempt is
     counted, then the code compared (every wrong code "invalid otp"; the last allowed
     attempt drops the challenge). A right code with a bad new password is refused with
     the password message WITHOUT consuming the code; else the challenge is taken
     atomically (one winner) and the code is spent.
  5. The new hash is written with ``basic_auth`` added and the email marked verified (the
     link proved it) or ``mobile_basic_auth`` added and the phone marked verified (the
     code proved it); the request is deleted (or the mfa cookie cleared), and then EVERY
     session of the user ends (reference surprise 8 fixed): commit SQL first (with the
     audit row), then drop sessions. A memory store failing after that commit is no error
     (issue 27): the committed marker already refuses the sessions it could not drop.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth import otp
from bastion.core.auth.claims import link_request
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import emailed_link, reset_password_redirect
from bastion.core.auth.mfa import Challenge, Purpose, without_devices
from bastion.core.auth.passwords import password_problem
from bastion.core.auth.policy import FlowEnv
from bastion.core.auth.responses import ForgotPasswordResponse, MessageResponse
from bastion.core.auth.user import (
    SignupMethod,
    User,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import (
    BastionError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, Event, LocalFlowError, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CreateVerificationRequest,
    DeleteUserSessions,
    DeleteVerificationRequest,
    Fail,
    HashPassword,
    LoadUser,
    LoadVerificationRequest,
    Respond,
    SendEmail,
    UpdateUser,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import (
    BASIC_AUTH_DISABLED,
    IDENTIFIER_REQUIRED,
    MOBILE_BASIC_AUTH_DISABLED,
)
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CountAttempt,
    DropChallenge,
    LoadChallenge,
    SetMfaCookie,
    TakeChallenge,
)
from bastion.core.state_machines.mfa_flow import INVALID_SESSION
from bastion.core.state_machines.mfa_issue import RESET_OTP_SENT
from bastion.core.state_machines.mfa_verify import INVALID_OTP
from bastion.core.state_machines.signup import INVALID_EMAIL, INVALID_PHONE
from bastion.core.state_machines.verification import EMAIL_SERVICE_DISABLED

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
USER_NOT_FOUND = "user not found"
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
    #: forgot by phone, parked: the MFA flow texts the code
    SMS_CODE_REQUIRED = "sms_code_required"
    #: reset by code: waiting for the stored challenge
    RESET_LOADING_CHALLENGE = "reset_loading_challenge"
    #: reset by code: waiting for the attempt count
    RESET_COUNTING_ATTEMPT = "reset_counting_attempt"
    #: reset by code: waiting for the code comparison
    RESET_CHECKING_CODE = "reset_checking_code"
    #: reset by code: waiting for the atomic take of the challenge
    RESET_TAKING_CHALLENGE = "reset_taking_challenge"
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
    #: the ``mfa`` cookie, ``None`` when absent (the SMS-code path)
    challenge_id: str | None = None
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
        "_on_forgot_user", State.CREATING_REQUEST, State.SMS_CODE_REQUIRED, State.DONE
    ),
    (State.CREATING_REQUEST, VerificationRequestCreated): edge("_on_link", State.DONE),
    (State.START, ResetPasswordRequested): edge(
        "_on_reset", State.RESET_LOADING_REQUEST, State.RESET_LOADING_CHALLENGE, State.FAILED
    ),
    (State.RESET_LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_challenge", State.RESET_COUNTING_ATTEMPT, State.FAILED
    ),
    (State.RESET_COUNTING_ATTEMPT, AttemptCounted): edge(
        "_on_attempt", State.RESET_CHECKING_CODE, State.FAILED
    ),
    (State.RESET_CHECKING_CODE, CodeChecked): edge(
        "_on_code_checked", State.RESET_TAKING_CHALLENGE, State.FAILED
    ),
    (State.RESET_TAKING_CHALLENGE, ChallengeTaken): edge(
        "_on_taken", State.RESET_LOADING_USER, State.FAILED
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
    #: the phone number a reset by SMS code names (forgot and reset)
    phone_number: str | None = None
    #: the challenge whose code a reset by SMS code presents
    challenge: Challenge | None = None
    attempts: int = 0


class PasswordResetMachine(Machine[State]):
    FLOW = "password_reset"
    STATES = State
    TABLE = TABLE
    CONTEXT = PasswordResetContext
    EMITS = frozenset(
        {
            AuditRecord,
            CheckCode,
            ClearMfaCookie,
            CountAttempt,
            CreateVerificationRequest,
            DeleteUserSessions,
            DeleteVerificationRequest,
            DropChallenge,
            Fail,
            HashPassword,
            LoadChallenge,
            LoadUser,
            LoadVerificationRequest,
            Respond,
            SendEmail,
            SetMfaCookie,
            StartChallenge,
            TakeChallenge,
            UpdateUser,
        }
    )
    ctx: PasswordResetContext

    def __init__(self, env: FlowEnv) -> None:
        super().__init__(env)
        #: the submitted SMS code, held (like the password) only until it is compared
        self._code: str | None = None

    @property
    def holds_secret(self) -> bool:
        return self._secret is not None or self._code is not None

    def _fail(self, error: type[BastionError], message: str) -> tuple[list[Effect], State]:
        self._code = None
        return super()._fail(error, message)

    # -- forgot_password ------------------------------------------------------------------

    def _on_forgot(self, event: ForgotPasswordRequested) -> tuple[list[Effect], State]:
        email = normalise_email(event.email or "")
        phone = (event.phone_number or "").strip()
        if not email and not phone:
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        if not email:
            return self._forgot_by_phone(phone)
        if not self.policy.enable_basic_authentication:
            return self._fail(FailedPrecondition, BASIC_AUTH_DISABLED)
        if not self.policy.email_enabled:
            return self._fail(FailedPrecondition, EMAIL_SERVICE_DISABLED)
        if not is_valid_email(email):
            return self._fail(InvalidArgument, INVALID_EMAIL)
        self.ctx.redirect_uri = reset_password_redirect(self.policy, event.redirect_uri)
        return [LoadUser(email=email)], State.FORGOT_LOADING_USER

    def _forgot_by_phone(self, phone: str) -> tuple[list[Effect], State]:
        if not self.policy.enable_mobile_basic_authentication:
            return self._fail(FailedPrecondition, MOBILE_BASIC_AUTH_DISABLED)
        if not self.policy.sms_enabled:
            return self._fail(FailedPrecondition, SMS_DISABLED)
        if not is_valid_phone_number(phone):
            return self._fail(InvalidArgument, INVALID_PHONE)
        self.ctx.phone_number = phone
        return [LoadUser(phone_number=phone)], State.FORGOT_LOADING_USER

    def _on_forgot_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user = event.user
        if self.ctx.phone_number is not None:
            return self._on_forgot_phone_user(user)
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

    def _on_forgot_phone_user(self, user: User | None) -> tuple[list[Effect], State]:
        if user is None or user.is_revoked or not user.phone_number:
            # The same answer and the same cookie as for a real account; no challenge
            # stands behind this one, so no code can ever be spent against it.
            cookie = SetMfaCookie(value=self._env.ids.new_id(), max_age=otp.OTP_TTL)
            return [cookie, Respond(result=_code_sent())], State.DONE
        self.ctx.user = user
        audit = AuditRecord(
            action=AuditAction.FORGOT_PASSWORD_REQUESTED,
            actor_id=user.id,
            actor_email=user.email,
            resource_id=user.id,
            metadata={"channel": "sms"},
        )
        handoff = StartChallenge(request=ChallengeRequested.for_password_reset(user))
        return [audit, handoff], State.SMS_CODE_REQUIRED

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
            return self._reset_by_code(event)
        if not self.policy.enable_basic_authentication:
            return self._fail(FailedPrecondition, BASIC_AUTH_DISABLED)
        self._check_password(event)
        self._secret = event.password
        return [LoadVerificationRequest(token=event.token)], State.RESET_LOADING_REQUEST

    def _check_password(self, event: ResetPasswordRequested) -> None:
        if event.password != event.confirm_password:
            self.ctx.password_problem = PASSWORDS_DIFFER
        else:
            strong = self.policy.enable_strong_password
            self.ctx.password_problem = password_problem(event.password, strong=strong)

    def _reset_by_code(self, event: ResetPasswordRequested) -> tuple[list[Effect], State]:
        phone = (event.phone_number or "").strip()
        if not phone:
            return self._fail(InvalidArgument, PHONE_REQUIRED)
        if not self.policy.enable_mobile_basic_authentication:
            return self._fail(FailedPrecondition, MOBILE_BASIC_AUTH_DISABLED)
        if not self.policy.sms_enabled:
            return self._fail(FailedPrecondition, SMS_DISABLED)
        if not event.challenge_id:
            return self._fail(Unauthenticated, INVALID_SESSION)
        self._check_password(event)
        self.ctx.phone_number = phone
        self._secret, self._code = event.password, event.otp
        return [LoadChallenge(challenge_id=event.challenge_id)], State.RESET_LOADING_CHALLENGE

    def _on_challenge(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        self._need_code()
        challenge, now = event.challenge, self._env.now()
        if (
            challenge is None
            or challenge.expired(now)
            or challenge.purpose is not Purpose.PASSWORD_RESET
            or (challenge.phone_number or "").strip() != self.ctx.phone_number
        ):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.challenge = challenge
        remaining = challenge.expires_at - now
        return [CountAttempt(challenge_id=challenge.id, ttl=remaining)], (
            State.RESET_COUNTING_ATTEMPT
        )

    def _on_attempt(self, event: AttemptCounted) -> tuple[list[Effect], State]:
        code, challenge = self._need_code(), self._require(self.ctx.challenge)
        self.ctx.attempts = event.attempts
        if event.attempts > otp.MAX_ATTEMPTS:
            fail, state = self._fail(Unauthenticated, INVALID_SESSION)
            return [DropChallenge(challenge_id=challenge.id), *fail], state
        digest = self._require(challenge.code_digest)
        return [CheckCode(challenge_id=challenge.id, code=code, digest=digest)], (
            State.RESET_CHECKING_CODE
        )

    def _on_code_checked(self, event: CodeChecked) -> tuple[list[Effect], State]:
        self._need_code()
        self._code = None
        challenge = self._require(self.ctx.challenge)
        if not event.ok:
            effects: list[Effect] = []
            if self.ctx.attempts >= otp.MAX_ATTEMPTS:
                effects.append(DropChallenge(challenge_id=challenge.id))
            fail, state = self._fail(InvalidArgument, INVALID_OTP)
            return [*effects, *fail], state
        if self.ctx.password_problem is not None:
            return self._fail(InvalidArgument, self.ctx.password_problem)
        return [TakeChallenge(challenge_id=challenge.id)], State.RESET_TAKING_CHALLENGE

    def _on_taken(self, event: ChallengeTaken) -> tuple[list[Effect], State]:
        if not event.ok:
            return self._fail(Unauthenticated, INVALID_SESSION)
        return [LoadUser(user_id=self._require(self.ctx.challenge).user_id)], (
            State.RESET_LOADING_USER
        )

    def _need_code(self) -> str:
        if self._code is None:
            self._state = State.ERROR
            raise LocalFlowError(f"{self.FLOW}: the submitted code does not survive to_dict")
        return self._code

    def _on_request(self, event: VerificationRequestLoaded) -> tuple[list[Effect], State]:
        request = link_request(
            event.request,
            event.claims,
            purposes=SETS_PASSWORD,
            policy=self.policy,
            now=self._env.now(),
        )
        if request is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        if self.ctx.password_problem is not None:
            return self._fail(InvalidArgument, self.ctx.password_problem)
        self.ctx.request = request
        return [LoadUser(email=request.email)], State.RESET_LOADING_USER

    def _on_reset_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        if event.user is None:
            if self.ctx.challenge is not None:
                return self._fail(NotFound, USER_NOT_FOUND)
            return self._fail(InvalidArgument, INVALID_TOKEN)
        self.ctx.user = event.user
        return [HashPassword(password=self._need_secret())], State.HASHING

    def _on_hashed(self, event: PasswordHashed) -> tuple[list[Effect], State]:
        self._secret = None
        user, now = self._require(self.ctx.user), self._env.now()
        mfa = True if self.policy.enforce_mfa else user.is_multi_factor_auth_enabled
        # Proving an address (or number) the account held unverified ends every other
        # credential with the password (issue 36): passkeys and the authenticator too.
        by_phone = self.ctx.challenge is not None
        proves = not (user.phone_number_verified if by_phone else user.email_verified)
        if proves:
            user = without_devices(user)
        if self.ctx.challenge is not None:
            updated = dataclasses.replace(
                user.with_signup_method(SignupMethod.MOBILE_BASIC_AUTH),
                password_hash=event.password_hash,
                phone_number_verified_at=user.phone_number_verified_at or now,
                is_multi_factor_auth_enabled=mfa,
                updated_at=now,
            )
            spent: Effect = ClearMfaCookie()
        else:
            request = self._require(self.ctx.request)
            updated = dataclasses.replace(
                user.with_signup_method(SignupMethod.BASIC_AUTH),
                password_hash=event.password_hash,
                email_verified_at=user.email_verified_at or now,
                is_multi_factor_auth_enabled=mfa,
                updated_at=now,
            )
            spent = DeleteVerificationRequest(request_id=request.id)
        # The audit row commits with the password (issue 27): DeleteUserSessions commits
        # what is queued before it ends the sessions in the memory store.
        return [
            UpdateUser(user=updated),
            spent,
            AuditRecord(
                action=AuditAction.PASSWORD_RESET,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
            ),
            DeleteUserSessions(user_id=user.id, end_links=True, end_credentials=proves),
            Respond(result=MessageResponse(message=PASSWORD_UPDATED)),
        ], State.DONE


def _code_sent() -> ForgotPasswordResponse:
    return ForgotPasswordResponse(message=RESET_OTP_SENT, should_show_mobile_otp_screen=True)
