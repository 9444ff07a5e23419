"""The MFA machine's verify steps (rules 3 to 8 of :mod:`core.state_machines.mfa`): the
challenge checked, one attempt counted, the code compared, tokens issued and the session
kept, the challenge taken, and the final commit that spends the code.
"""

from __future__ import annotations

import dataclasses

from bastion.core.auth import otp, totp
from bastion.core.auth.mfa import Method
from bastion.core.auth.responses import AuthResponse
from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, Fail
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    DeleteSession,
    EmitWebhook,
    LoadUser,
    Respond,
    UpdateUser,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.login import IDENTIFIER_REQUIRED
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CountAttempt,
    DropChallenge,
    LoadAuthenticator,
    LoadChallenge,
    MfaOutcome,
    RecordMfaOutcome,
    RecordTotpStep,
    TakeChallenge,
    UseRecoveryCode,
)
from bastion.core.state_machines.mfa_flow import (
    INVALID_SESSION,
    MfaFlow,
    State,
    VerifyOtpRequested,
)
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = ["INVALID_OTP", "VerifySteps"]

INVALID_OTP = "invalid otp"
TOO_MANY_WRONG_CODES = "too many wrong codes, please try again later"
INVALID_REQUEST = "invalid verification request"
OTP_VERIFIED = "OTP verified successfully."


class VerifySteps(MfaFlow, partial=True):
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
