"""Second factors and SMS codes: issue a challenge, ``verify_otp``, ``resend_otp``.

Rules / theory of operation
---------------------------
A :class:`~core.auth.mfa.Challenge` is a value in the memory store, keyed by its id, which
is also the ``mfa`` cookie; both live exactly ``challenge.ttl`` seconds. One machine runs
per request, starting from one of three events.

issue (``ChallengeRequested``: login parked in SECOND_FACTOR_REQUIRED, a phone signup or
login that must prove the number, or ``forgot_password`` by phone)
  1. Email or SMS: a fresh 6-digit code is generated, only its keyed digest stored; the
     code is mailed or texted; the cookie is set. The answer carries no tokens, only
     ``should_show_email_otp_screen`` / ``should_show_mobile_otp_screen``.
  2. Authenticator: with a verified authenticator, "Proceed to totp screen"; without one,
     a new secret and recovery codes are enrolled (unverified) and shown once with the QR
     code; the first accepted code completes the enrolment.
  2a. Passkey: asked for (the user's passkey is the only usable factor, or set up first),
     or in place of 2's enrolment of a new authenticator when the user has a passkey
     (never a second enrolment forced on them): the challenge is stored with no code, the
     cookie set, and the answer is "Proceed to mfa verification"; ``webauthn_login_*``
     with that cookie finishes the login (:mod:`core.state_machines.passkey`), never
     ``verify_otp`` (every code is wrong). Whatever the method,
     ``should_offer_webauthn_mfa_verify`` says the user's passkey may answer instead.
verify (``VerifyOtpRequested``)
  3. The CHALLENGE is checked first (fix 15): no cookie, no stored challenge, an expired
     one, one for another identifier or one meant for ``reset_password`` are all
     Unauthenticated "invalid session", and nothing is consumed.
  4. Then one attempt is counted (atomically, before comparing), so at most
     ``MAX_ATTEMPTS`` codes are ever compared; past that the challenge is dead.
  5. Then the code: an email/SMS code against its digest; an authenticator code for
     now +-1 step and only for a step later than the last accepted one; else, once
     enrolled, a recovery code still unused. EVERY wrong code, whatever the method, is
     InvalidArgument "invalid otp"; the attempt that exhausts the challenge also drops it.
     An authenticator or recovery code is only checked here: it is spent in 8.
  6. The user must still exist and not be revoked; tokens are issued as at login and the
     session kept (marked as won by a second factor just now).
  7. Then the challenge is taken atomically: of two concurrent verifies exactly one
     proceeds; the other drops the session it kept and is "invalid session". An
     email/SMS code is consumed by this. The take is the last memory-store step and the
     commit follows it (issue 27): a store that fails before leaves the challenge, so
     the identical retry signs in; nothing durable is written before.
  8. In one transaction: an authenticator code's step is recorded or a recovery code
     removed, each a compare-and-set (issue 27: spent earlier, a store failing after it
     lost the code, a recovery code for good); an identifier the code proved is marked
     verified (a completed phone signup), ``user.login`` (and ``user.signup`` for a
     signup) sent, audited; the mfa cookie is cleared. A code another request spent since
     5 (the same code on another challenge) aborts the transaction: the driver drops the
     session kept in 6 and answers "invalid otp", as for any replayed code (this
     challenge, taken in 7, is gone: a login starts over; no failure is audited, the
     transaction that would have held it rolled back).
  Every challenge issued, passed or failed is audited and ``RecordMfaOutcome``: counted
  and sent as the ``user.mfa_*`` webhook event of the same name.
resend (``ResendOtpRequested``)
  9. The same challenge checks as 3; authenticator and passkey challenges have nothing to
     resend; a code may be resent ``RESEND_INTERVAL`` s after the last, ``MAX_SENDS`` codes
     in all (ResourceExhausted). The old challenge is taken (so its code dies with it) and
     a new one, with a new id, cookie and code, replaces it.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TypeVar

from bastion.core.auth import otp, totp
from bastion.core.auth.claims import login_method_for
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.mfa import Challenge, EnrolmentResponse, Method, Purpose, challenge_ttl
from bastion.core.auth.qr import png_base64
from bastion.core.auth.responses import (
    AuthResponse,
    ForgotPasswordResponse,
    IssuedTokens,
    MessageResponse,
)
from bastion.core.auth.user import SignupMethod, User, normalise_email
from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
)
from bastion.core.state_machines._machine import (
    SECRET,
    Effect,
    Event,
    Fail,
    Machine,
    Table,
    edge,
)
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    DeleteSession,
    EmitWebhook,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.handoff import ChallengeRequested
from bastion.core.state_machines.login import IDENTIFIER_REQUIRED
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CodeGenerated,
    CountAttempt,
    DropChallenge,
    EnrolAuthenticator,
    GenerateCode,
    LoadAuthenticator,
    LoadChallenge,
    MfaOutcome,
    RecordMfaOutcome,
    RecordTotpStep,
    SendSms,
    SetMfaCookie,
    StoreChallenge,
    TakeChallenge,
    UseRecoveryCode,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = [
    "ChallengeRequested",
    "MfaMachine",
    "ResendOtpRequested",
    "State",
    "VerifyOtpRequested",
    "sms_text",
]

INVALID_SESSION = "invalid session"
INVALID_OTP = "invalid otp"
TOO_MANY_WRONG_CODES = "too many wrong codes, please try again later"
INVALID_REQUEST = "invalid verification request"
OTP_VERIFIED = "OTP verified successfully."
OTP_RESENT = "OTP has been sent. Please check your inbox"
NOTHING_TO_RESEND = "an authenticator code cannot be resent"
RESEND_TOO_SOON = "please wait before requesting another code"
TOO_MANY_CODES = "too many codes requested, please log in again"
EMAIL_OTP_SENT = "Please check email inbox for the OTP"
SMS_OTP_SENT = "Please check text message for the OTP"
SIGNUP_OTP_SENT = "Please check the OTP in your inbox"
RESET_OTP_SENT = "Please enter the OTP sent to your phone number and change your password."
TOTP_SCREEN = "Proceed to totp screen"
TOTP_ENROLMENT = "Proceed to totp verification screen"
PASSKEY_SCREEN = "Proceed to mfa verification"
NO_CODE_TO_RESEND = "a passkey challenge has no code to resend"

R = TypeVar("R")


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


TABLE: Table[State] = {
    # issue
    (State.START, ChallengeRequested): edge(
        "_on_challenge", State.GENERATING_CODE, State.ISSUE_LOADING_AUTHENTICATOR, State.DONE
    ),
    (State.GENERATING_CODE, CodeGenerated): edge("_on_code", State.DONE),
    (State.ISSUE_LOADING_AUTHENTICATOR, AuthenticatorLoaded): edge(
        "_on_issue_authenticator", State.DONE, State.ENROLLING
    ),
    (State.ENROLLING, AuthenticatorEnrolled): edge("_on_enrolled", State.DONE),
    # verify
    (State.START, VerifyOtpRequested): edge("_on_verify", State.LOADING_CHALLENGE, State.FAILED),
    (State.LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_loaded", State.COUNTING_ATTEMPT, State.FAILED
    ),
    (State.COUNTING_ATTEMPT, AttemptCounted): edge(
        "_on_attempt", State.CHECKING_CODE, State.LOADING_AUTHENTICATOR, State.FAILED
    ),
    (State.CHECKING_CODE, CodeChecked): edge("_on_code_checked", State.LOADING_USER, State.FAILED),
    (State.LOADING_AUTHENTICATOR, AuthenticatorLoaded): edge(
        "_on_authenticator", State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.ISSUING_TOKENS, State.FAILED),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.TAKING_CHALLENGE),
    (State.TAKING_CHALLENGE, ChallengeTaken): edge("_on_taken", State.DONE, State.FAILED),
    # resend
    (State.START, ResendOtpRequested): edge(
        "_on_resend", State.RESEND_LOADING_CHALLENGE, State.FAILED
    ),
    (State.RESEND_LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_resend_loaded", State.RESEND_TAKING_CHALLENGE, State.FAILED
    ),
    (State.RESEND_TAKING_CHALLENGE, ChallengeTaken): edge(
        "_on_resend_taken", State.RESEND_LOADING_USER, State.FAILED
    ),
    (State.RESEND_LOADING_USER, UserLoaded): edge(
        "_on_resend_user", State.GENERATING_CODE, State.FAILED
    ),
}


def sms_text(code: str) -> str:
    return f"Your verification code is: {code}"


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


class MfaMachine(Machine[State]):
    FLOW = "mfa"
    STATES = State
    TABLE = TABLE
    CONTEXT = MfaContext
    EMITS = frozenset(
        {
            AuditRecord,
            CheckCode,
            ClearMfaCookie,
            CountAttempt,
            DeleteSession,
            DropChallenge,
            EmitWebhook,
            EnrolAuthenticator,
            Fail,
            GenerateCode,
            IssueTokens,
            LoadAuthenticator,
            LoadChallenge,
            LoadUser,
            PersistSession,
            RecordMfaOutcome,
            RecordTotpStep,
            Respond,
            SendEmail,
            SendSms,
            SetMfaCookie,
            SetSessionCookie,
            StoreChallenge,
            TakeChallenge,
            UpdateUser,
            UseRecoveryCode,
        }
    )
    ctx: MfaContext

    # -- issue ------------------------------------------------------------------------------

    def _on_challenge(self, event: ChallengeRequested) -> tuple[list[Effect], State]:
        user, now = event.user, self._env.now()
        by_phone = event.channel in (SignupMethod.MOBILE_BASIC_AUTH, SignupMethod.MOBILE_OTP)
        sms = event.method is Method.SMS_OTP
        self.ctx.user = user
        self.ctx.offers = event.offers
        self.ctx.passkey = event.passkey
        self.ctx.challenge = Challenge(
            id=self._env.ids.new_id(),
            user_id=user.id,
            method=event.method,
            purpose=event.purpose,
            email=None if by_phone else user.email,
            phone_number=user.phone_number if by_phone else None,
            login_method=SignupMethod.MOBILE_OTP.value if sms else login_method_for(event.channel),
            auth_recipe=event.channel.value,
            roles=event.roles,
            scope=event.scope,
            oauth_state=event.state,
            issued_at=now,
            expires_at=now + challenge_ttl(event.method, event.purpose),
            setup=event.setup,
        )
        if event.method is Method.TOTP:
            return [LoadAuthenticator(user_id=user.id)], State.ISSUE_LOADING_AUTHENTICATOR
        if event.method is Method.WEBAUTHN:
            return self._park_for_passkey(self.ctx.challenge), State.DONE
        return [GenerateCode(challenge_id=self.ctx.challenge.id)], State.GENERATING_CODE

    def _park_for_passkey(self, challenge: Challenge) -> list[Effect]:
        """Rule 2a: a challenge only the user's passkey answers."""
        self.ctx.challenge = challenge
        return [
            StoreChallenge(challenge=challenge),
            *self._issued(challenge),
            Respond(result=self._offering(AuthResponse(message=PASSKEY_SCREEN))),
        ]

    def _on_code(self, event: CodeGenerated) -> tuple[list[Effect], State]:
        user, draft = self._require(self.ctx.user), self._require(self.ctx.challenge)
        challenge = dataclasses.replace(draft, code_digest=event.digest)
        if draft.method is Method.EMAIL_OTP:
            to = self._require(user.email)
            send: Effect = SendEmail(event=EmailEvent.VERIFY_OTP, to=to, user=user, otp=event.code)
        else:
            send = SendSms(to=self._require(user.phone_number), body=sms_text(event.code))
        effects = [StoreChallenge(challenge=challenge), send, *self._issued(challenge)]
        if self.ctx.resend:
            audit = AuditRecord(
                action=AuditAction.OTP_RESENT, actor_id=user.id, resource_id=user.id
            )
            return [*effects, audit, Respond(result=MessageResponse(message=OTP_RESENT))], (
                State.DONE
            )
        return [*effects, Respond(result=self._offering(_issue_response(challenge)))], State.DONE

    def _on_issue_authenticator(self, event: AuthenticatorLoaded) -> tuple[list[Effect], State]:
        challenge = self._require(self.ctx.challenge)
        if event.authenticator is None or not event.authenticator.verified:
            if self.ctx.passkey and not challenge.setup:  # rule 2a, not a new enrolment
                ttl = challenge_ttl(Method.WEBAUTHN, challenge.purpose)
                passkey = dataclasses.replace(
                    challenge, method=Method.WEBAUTHN, expires_at=challenge.issued_at + ttl
                )
                return self._park_for_passkey(passkey), State.DONE
            return [EnrolAuthenticator(user_id=challenge.user_id)], State.ENROLLING
        response = AuthResponse(message=TOTP_SCREEN, should_show_totp_screen=True)
        return [
            StoreChallenge(challenge=challenge),
            *self._issued(challenge),
            Respond(result=self._offering(response)),
        ], State.DONE

    def _on_enrolled(self, event: AuthenticatorEnrolled) -> tuple[list[Effect], State]:
        user = self._require(self.ctx.user)
        challenge = dataclasses.replace(self._require(self.ctx.challenge), enrolling=True)
        account = user.email or self._require(user.phone_number)
        uri = totp.provisioning_uri(
            event.secret, account=account, issuer=self.policy.organization_name
        )
        response = EnrolmentResponse(
            message=TOTP_ENROLMENT,
            should_show_totp_screen=True,
            authenticator_scanner_image=png_base64(uri),
            authenticator_secret=event.secret,
            authenticator_recovery_codes=event.recovery_codes,
        )
        return [
            StoreChallenge(challenge=challenge),
            *self._issued(challenge),
            Respond(result=self._offering(response)),
        ], State.DONE

    def _offering(self, response: R) -> R:
        """The answer with the login's offers: codes to set up (``should_offer_*_mfa_setup``)
        and the user's passkey (``should_offer_webauthn_mfa_verify``)."""
        offers, passkey = self.ctx.offers, self.ctx.passkey
        if not (offers or passkey) or not isinstance(response, AuthResponse):
            return response
        return dataclasses.replace(
            response,
            should_offer_email_otp_mfa_setup=Method.EMAIL_OTP in offers,
            should_offer_sms_otp_mfa_setup=Method.SMS_OTP in offers,
            should_offer_webauthn_mfa_verify=passkey,
        )

    def _issued(self, challenge: Challenge) -> list[Effect]:
        return [
            SetMfaCookie(value=challenge.id, max_age=challenge.ttl),
            AuditRecord(
                action=AuditAction.MFA_CHALLENGE_ISSUED,
                actor_id=challenge.user_id,
                resource_id=challenge.user_id,
                metadata={"method": challenge.method.value, "purpose": challenge.purpose.value},
            ),
            RecordMfaOutcome(
                user_id=challenge.user_id, method=challenge.method, outcome=MfaOutcome.ISSUED
            ),
        ]

    # -- verify -----------------------------------------------------------------------------

    def _on_verify(self, event: VerifyOtpRequested) -> tuple[list[Effect], State]:
        if not event.challenge_id:
            return self._fail(Unauthenticated, INVALID_SESSION)
        if not (event.email or "").strip() and not (event.phone_number or "").strip():
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        self._secret = event.code
        self.ctx.is_totp = event.is_totp
        self.ctx.email, self.ctx.phone_number = event.email, event.phone_number
        return [LoadChallenge(challenge_id=event.challenge_id)], State.LOADING_CHALLENGE

    def _on_loaded(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        self._need_secret()
        challenge = event.challenge
        if challenge is None or not self._usable(challenge, verify=True):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.challenge = challenge
        remaining = challenge.expires_at - self._env.now()
        count = CountAttempt(challenge_id=challenge.id, ttl=remaining, user_id=challenge.user_id)
        return [count], State.COUNTING_ATTEMPT

    def _on_attempt(self, event: AttemptCounted) -> tuple[list[Effect], State]:
        code, challenge = self._need_secret(), self._require(self.ctx.challenge)
        self.ctx.attempts = event.attempts
        if event.user_attempts > otp.USER_GUESS_BUDGET:
            self._secret = None
            locked = AuditRecord(
                action=AuditAction.MFA_GUESSES_EXHAUSTED,
                actor_id=challenge.user_id,
                resource_id=challenge.user_id,
                metadata={"method": challenge.method.value, "reason": "guess budget"},
            )
            announce = RecordMfaOutcome(
                user_id=challenge.user_id, method=challenge.method, outcome=MfaOutcome.EXHAUSTED
            )
            refusal = Fail(
                error=ResourceExhausted,
                message=TOO_MANY_WRONG_CODES,
                retry_after=otp.USER_GUESS_WINDOW,
            )
            return [locked, announce, refusal], State.FAILED
        if event.attempts > otp.MAX_ATTEMPTS:
            fail, state = self._fail(Unauthenticated, INVALID_SESSION)
            return [DropChallenge(challenge_id=challenge.id), *fail], state
        if self.ctx.is_totp != (challenge.method is Method.TOTP):
            return self._wrong_code()
        if challenge.method is Method.WEBAUTHN:  # only the passkey answers it (rule 2a)
            return self._wrong_code()
        if challenge.method is Method.TOTP:
            return [LoadAuthenticator(user_id=challenge.user_id)], State.LOADING_AUTHENTICATOR
        digest = self._require(challenge.code_digest)
        return [CheckCode(challenge_id=challenge.id, code=code, digest=digest)], (
            State.CHECKING_CODE
        )

    def _on_code_checked(self, event: CodeChecked) -> tuple[list[Effect], State]:
        self._need_secret()
        if not event.ok:
            return self._wrong_code()
        return self._load_user()

    def _on_authenticator(self, event: AuthenticatorLoaded) -> tuple[list[Effect], State]:
        code, challenge = self._need_secret(), self._require(self.ctx.challenge)
        found = event.authenticator
        if found is None or not (found.verified or challenge.enrolling):
            return self._wrong_code()
        step = totp.matching_step(
            found.secret, code, now=self._env.clock.now(), last_used_step=found.last_used_step
        )
        if step is not None:
            self.ctx.step = step
            return self._load_user()
        digest = totp.find_recovery_code(code, found.recovery_digests) if found.verified else None
        if digest is None:
            return self._wrong_code()
        self.ctx.recovery_digest = digest
        return self._load_user()

    def _load_user(self) -> tuple[list[Effect], State]:
        self._secret = None
        challenge = self._require(self.ctx.challenge)
        return [LoadUser(user_id=challenge.user_id)], State.LOADING_USER

    def _wrong_code(self) -> tuple[list[Effect], State]:
        """One answer for every wrong code; the last allowed attempt kills the challenge."""
        self._secret = None
        challenge = self._require(self.ctx.challenge)
        effects: list[Effect] = [
            AuditRecord(
                action=AuditAction.MFA_FAILED,
                actor_id=challenge.user_id,
                resource_id=challenge.user_id,
                metadata={"method": challenge.method.value, "attempt": self.ctx.attempts},
            ),
            RecordMfaOutcome(
                user_id=challenge.user_id, method=challenge.method, outcome=MfaOutcome.FAILED
            ),
        ]
        if self.ctx.attempts >= otp.MAX_ATTEMPTS:
            effects += [
                DropChallenge(challenge_id=challenge.id),
                AuditRecord(
                    action=AuditAction.MFA_GUESSES_EXHAUSTED,
                    actor_id=challenge.user_id,
                    resource_id=challenge.user_id,
                    metadata={"method": challenge.method.value},
                ),
            ]
        fail, state = self._fail(InvalidArgument, INVALID_OTP)
        return [*effects, *fail], state

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        challenge, user, now = self._require(self.ctx.challenge), event.user, self._env.now()
        if user is None:
            return self._fail(NotFound, INVALID_REQUEST)
        if user.is_revoked:
            return self._fail(FailedPrecondition, INVALID_REQUEST)
        proved_email = challenge.method is Method.EMAIL_OTP and not user.email_verified
        proved_phone = challenge.method is Method.SMS_OTP and not user.phone_number_verified
        if proved_email or proved_phone:
            self.ctx.signup = True
            user = dataclasses.replace(
                user,
                email_verified_at=now if proved_email else user.email_verified_at,
                phone_number_verified_at=now if proved_phone else user.phone_number_verified_at,
                updated_at=now,
            )
        if challenge.setup and challenge.method.value not in user.enrolled_mfa_methods:
            self.ctx.enrolled = True
            enrolled = (*user.enrolled_mfa_methods, challenge.method.value)
            user = dataclasses.replace(user, enrolled_mfa_methods=enrolled, updated_at=now)
        self.ctx.user = user
        issue = issue_tokens(
            self._env.ids,
            user=user,
            roles=challenge.roles,
            scope=challenge.scope,
            login_method=challenge.login_method,
            state=challenge.oauth_state,
        )
        return [issue], State.ISSUING_TOKENS

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        """The session first (rule 6), then the take (rule 7)."""
        challenge, user = self._require(self.ctx.challenge), self._require(self.ctx.user)
        self.ctx.tokens = event.tokens
        return [
            *keep_session(user, challenge.login_method, event.tokens, fresh_factor=True),
            TakeChallenge(challenge_id=challenge.id, user_id=challenge.user_id),
        ], State.TAKING_CHALLENGE

    def _on_taken(self, event: ChallengeTaken) -> tuple[list[Effect], State]:
        """Rule 8; a challenge someone else took first drops the session kept for it."""
        challenge, user = self._require(self.ctx.challenge), self._require(self.ctx.user)
        tokens = self._require(self.ctx.tokens)
        if not event.ok:
            refused, state = self._fail(Unauthenticated, INVALID_SESSION)
            ended = DeleteSession(
                user_id=user.id, login_method=challenge.login_method, nonce=tokens.nonce
            )
            return [ended, *refused], state
        recipe, recovery = challenge.auth_recipe, self.ctx.recovery_digest is not None
        effects: list[Effect] = [*self._spend(challenge.user_id), ClearMfaCookie()]
        if self.ctx.signup or self.ctx.enrolled:  # rule 8: the row changed in _on_user
            effects.append(UpdateUser(user=user))
        if self.ctx.signup:
            verified = (
                AuditAction.PHONE_VERIFIED
                if challenge.method is Method.SMS_OTP
                else AuditAction.EMAIL_VERIFIED
            )
            effects += [
                EmitWebhook(event=WebhookEvent.SIGNUP, user=user, auth_recipe=recipe),
                AuditRecord(
                    action=verified, actor_id=user.id, actor_email=user.email, resource_id=user.id
                ),
            ]
        if self.ctx.enrolled:
            method = challenge.method.value
            effects += [
                EmitWebhook(event=WebhookEvent.MFA_ENROLLED, user=user, auth_recipe=method),
                AuditRecord(
                    action=AuditAction.MFA_ENROLLED,
                    actor_id=user.id,
                    actor_email=user.email,
                    resource_id=user.id,
                    metadata={"method": method},
                ),
            ]
        effects += [
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=recipe),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata={"mfa_method": challenge.method.value, "recovery_code": recovery},
            ),
            AuditRecord(
                action=AuditAction.MFA_PASSED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata={"method": challenge.method.value, "recovery_code": recovery},
            ),
            RecordMfaOutcome(user_id=user.id, method=challenge.method, outcome=MfaOutcome.PASSED),
            Respond(result=AuthResponse.with_tokens(OTP_VERIFIED, user, tokens)),
        ]
        return effects, State.DONE

    def _spend(self, user_id: str) -> list[Effect]:
        """Rule 8: the authenticator or recovery code, spent first in the final commit (a
        driver that cannot roll back stops at it before writing the rest)."""
        if self.ctx.step is not None:
            return [RecordTotpStep(user_id=user_id, step=self.ctx.step)]
        if self.ctx.recovery_digest is not None:
            return [UseRecoveryCode(user_id=user_id, digest=self.ctx.recovery_digest)]
        return []

    # -- resend -----------------------------------------------------------------------------

    def _on_resend(self, event: ResendOtpRequested) -> tuple[list[Effect], State]:
        if not event.challenge_id:
            return self._fail(Unauthenticated, INVALID_SESSION)
        if not (event.email or "").strip() and not (event.phone_number or "").strip():
            return self._fail(InvalidArgument, IDENTIFIER_REQUIRED)
        self.ctx.email, self.ctx.phone_number = event.email, event.phone_number
        return [LoadChallenge(challenge_id=event.challenge_id)], State.RESEND_LOADING_CHALLENGE

    def _on_resend_loaded(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        challenge, now = event.challenge, self._env.now()
        if challenge is None or not self._usable(challenge, verify=False):
            return self._fail(Unauthenticated, INVALID_SESSION)
        if challenge.method is Method.TOTP:
            return self._fail(FailedPrecondition, NOTHING_TO_RESEND)
        if challenge.method is Method.WEBAUTHN:
            return self._fail(FailedPrecondition, NO_CODE_TO_RESEND)
        if challenge.sends >= otp.MAX_SENDS:
            return self._fail(ResourceExhausted, TOO_MANY_CODES)
        if now - challenge.issued_at < otp.RESEND_INTERVAL:
            return self._fail(ResourceExhausted, RESEND_TOO_SOON)
        self.ctx.challenge = challenge
        return [TakeChallenge(challenge_id=challenge.id)], State.RESEND_TAKING_CHALLENGE

    def _on_resend_taken(self, event: ChallengeTaken) -> tuple[list[Effect], State]:
        if not event.ok:
            return self._fail(Unauthenticated, INVALID_SESSION)
        return [LoadUser(user_id=self._require(self.ctx.challenge).user_id)], (
            State.RESEND_LOADING_USER
        )

    def _on_resend_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        old, now = self._require(self.ctx.challenge), self._env.now()
        if event.user is None or event.user.is_revoked:
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.user = event.user
        self.ctx.resend = True
        self.ctx.challenge = dataclasses.replace(
            old,
            id=self._env.ids.new_id(),
            code_digest=None,
            issued_at=now,
            expires_at=now + challenge_ttl(old.method, old.purpose),
            sends=old.sends + 1,
        )
        return [GenerateCode(challenge_id=self.ctx.challenge.id)], State.GENERATING_CODE

    # -- shared -----------------------------------------------------------------------------

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


def _issue_response(challenge: Challenge) -> AuthResponse | ForgotPasswordResponse:
    if challenge.purpose is Purpose.PASSWORD_RESET:
        return ForgotPasswordResponse(message=RESET_OTP_SENT, should_show_mobile_otp_screen=True)
    if challenge.method is Method.EMAIL_OTP:
        return AuthResponse(message=EMAIL_OTP_SENT, should_show_email_otp_screen=True)
    message = SIGNUP_OTP_SENT if challenge.purpose is Purpose.SIGNUP else SMS_OTP_SENT
    return AuthResponse(message=message, should_show_mobile_otp_screen=True)
