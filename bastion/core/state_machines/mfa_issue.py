"""The MFA machine's issue steps (rules 1 to 2a of :mod:`core.state_machines.mfa`): a
challenge is stored and its code mailed or texted, an authenticator asked for or enrolled,
or the login parked for the user's passkey. A resend ends here too, with its new code.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from bastion.core.auth import totp
from bastion.core.auth.claims import login_method_for
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.mfa import Challenge, EnrolmentResponse, Method, Purpose, challenge_ttl
from bastion.core.auth.qr import png_base64
from bastion.core.auth.responses import AuthResponse, ForgotPasswordResponse, MessageResponse
from bastion.core.auth.user import SignupMethod
from bastion.core.state_machines._machine import Effect
from bastion.core.state_machines.effects import AuditAction, AuditRecord, Respond, SendEmail
from bastion.core.state_machines.handoff import ChallengeRequested
from bastion.core.state_machines.mfa_effects import (
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    CodeGenerated,
    EnrolAuthenticator,
    GenerateCode,
    LoadAuthenticator,
    MfaOutcome,
    RecordMfaOutcome,
    SendSms,
    SetMfaCookie,
    StoreChallenge,
)
from bastion.core.state_machines.mfa_flow import MfaFlow, State

__all__ = ["IssueSteps", "sms_text"]

OTP_RESENT = "OTP has been sent. Please check your inbox"
EMAIL_OTP_SENT = "Please check email inbox for the OTP"
SMS_OTP_SENT = "Please check text message for the OTP"
SIGNUP_OTP_SENT = "Please check the OTP in your inbox"
RESET_OTP_SENT = "Please enter the OTP sent to your phone number and change your password."
TOTP_SCREEN = "Proceed to totp screen"
TOTP_ENROLMENT = "Proceed to totp verification screen"
PASSKEY_SCREEN = "Proceed to mfa verification"

R = TypeVar("R")


def sms_text(code: str) -> str:
    return f"Your verification code is: {code}"


class IssueSteps(MfaFlow, partial=True):
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


def _issue_response(challenge: Challenge) -> AuthResponse | ForgotPasswordResponse:
    if challenge.purpose is Purpose.PASSWORD_RESET:
        return ForgotPasswordResponse(message=RESET_OTP_SENT, should_show_mobile_otp_screen=True)
    if challenge.method is Method.EMAIL_OTP:
        return AuthResponse(message=EMAIL_OTP_SENT, should_show_email_otp_screen=True)
    message = SIGNUP_OTP_SENT if challenge.purpose is Purpose.SIGNUP else SMS_OTP_SENT
    return AuthResponse(message=message, should_show_mobile_otp_screen=True)
