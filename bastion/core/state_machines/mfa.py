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

The machine is three modules: the issue steps (1 to 2a) are
:mod:`core.state_machines.mfa_issue`, the verify steps (3 to 8)
:mod:`core.state_machines.mfa_verify`, and the resend steps (9) are here; their states and
context are :mod:`core.state_machines.mfa_flow`.
"""

from __future__ import annotations

import dataclasses

from bastion.core.auth import otp
from bastion.core.auth.mfa import Method, challenge_ttl
from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    ResourceExhausted,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, Fail, Table, edge
from bastion.core.state_machines.effects import (
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
    RecordMfaOutcome,
    RecordTotpStep,
    SendSms,
    SetMfaCookie,
    StoreChallenge,
    TakeChallenge,
    UseRecoveryCode,
)
from bastion.core.state_machines.mfa_flow import (
    INVALID_SESSION,
    MfaContext,
    ResendOtpRequested,
    State,
    VerifyOtpRequested,
)
from bastion.core.state_machines.mfa_issue import IssueSteps
from bastion.core.state_machines.mfa_verify import VerifySteps

__all__ = [
    "ChallengeRequested",
    "MfaMachine",
    "ResendOtpRequested",
    "State",
    "VerifyOtpRequested",
]

NOTHING_TO_RESEND = "an authenticator code cannot be resent"
RESEND_TOO_SOON = "please wait before requesting another code"
TOO_MANY_CODES = "too many codes requested, please log in again"
NO_CODE_TO_RESEND = "a passkey challenge has no code to resend"


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


class MfaMachine(IssueSteps, VerifySteps):
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
