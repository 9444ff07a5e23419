"""The authentication operations (issue 3), shared by REST, GraphQL and gRPC.

Each public coroutine is a service operation: ``(request, caller) -> Reply``, the request
one of :mod:`service.auth.requests`. The
flows with a machine in ``core.state_machines`` (signup, login, magic link, verification,
password reset, session rotation/refresh/logout/revoke) are run by
:class:`~service.auth.driver.FlowRun`; the account operations (profile, update,
deactivate, validation) live in :mod:`service.auth.account`, mixed in here.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
from typing import Any

from bastion.core import redirects
from bastion.core.auth import otp
from bastion.core.auth.claims import TokenType
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.user import has_control_character, is_valid_email, normalise_email
from bastion.core.errors import (
    ClientError,
    InvalidArgument,
    ResourceExhausted,
    Unauthenticated,
)
from bastion.core.state_machines import (
    LoginMachine,
    PasswordResetMachine,
    SessionMachine,
    SignupMachine,
    VerificationMachine,
)
from bastion.core.state_machines.login import LoginRequested
from bastion.core.state_machines.magic_link import MagicLinkRequested
from bastion.core.state_machines.mfa import (
    RESEND_TOO_SOON,
    MfaMachine,
    ResendOtpRequested,
    VerifyOtpRequested,
)
from bastion.core.state_machines.password_reset import (
    ForgotPasswordRequested,
    ResetPasswordRequested,
)
from bastion.core.state_machines.session import (
    LogoutRequested,
    RefreshRequested,
    RevokeRequested,
    SessionRef,
    SessionRequested,
)
from bastion.core.state_machines.signup import SignupRequested
from bastion.core.state_machines.verification import (
    ResendVerifyEmailRequested,
    VerifyEmailRequested,
)
from bastion.service.auth.driver import FlowRun
from bastion.service.auth.email_undo import undo_email_change
from bastion.service.auth.mailed_links import Flow, MailedLinks
from bastion.service.auth.mfa_setup import MfaSetupOperations
from bastion.service.auth.requests import (
    ForgotPasswordRequest,
    LoginRequest,
    LogoutRequest,
    MagicLinkLoginRequest,
    ResendOtpRequest,
    ResendVerifyEmailRequest,
    ResetPasswordRequest,
    RevokeRequest,
    SessionRequest,
    SignupRequest,
    UndoEmailChangeRequest,
    VerifyEmailRequest,
    VerifyOtpRequest,
)
from bastion.service.auth.session_list import SessionListOperations
from bastion.service.auth.sessions import ACCESS
from bastion.service.context import CallerContext, Reply
from bastion.storage import StorageUnavailable

__all__ = ["AuthService"]

log = logging.getLogger("bastion.auth")

#: Failed logins per (identifier, client address), then per identifier alone, per window.
#: Mailed links (reset, verification, magic link) per address and window.
MAILS_PER_ADDRESS = 5
MAILS_PER_ADDRESS_WINDOW = 15 * 60
TOO_MANY_MAILS = "too many emails to this address, please try again later"
LOGIN_FAILURES_PER_ADDRESS = 5
LOGIN_FAILURES_PER_ADDRESS_WINDOW = 300
LOGIN_FAILURES_PER_IDENTIFIER = 20
LOGIN_FAILURES_PER_IDENTIFIER_WINDOW = 900
INVALID_CREDENTIALS = "invalid credentials"
INVALID_REDIRECT = "invalid redirect URI"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:32]


class AuthService(SessionListOperations, MfaSetupOperations):
    # -- shared helpers -----------------------------------------------------------------------

    @functools.cached_property
    def mailed_links(self) -> MailedLinks:
        return MailedLinks(self)

    def redirect_uri(self, uri: str | None) -> str | None:
        """A request's ``redirect_uri`` if our origin rules allow it (same origin as
        ``--url`` when every origin is allowed), else InvalidArgument."""
        if uri is None:
            return None
        if not self.redirect_allowed(uri):
            raise InvalidArgument(INVALID_REDIRECT)
        return uri

    def redirect_allowed(self, uri: str) -> bool:
        """Every redirect target's one rule: core/redirects.py (as a browser reads it)."""
        return redirects.redirect_allowed(uri, self.origins)

    @staticmethod
    def reply(result: Any, run: FlowRun) -> Reply:
        return Reply(result.to_api_dict(), tuple(run.cookies))

    # -- signup and login ---------------------------------------------------------------------

    async def signup(self, request: SignupRequest, caller: CallerContext) -> Reply:
        event = SignupRequested(
            email=request.email,
            phone_number=request.phone_number,
            password=request.password,
            confirm_password=request.confirm_password,
            roles=request.roles,
            scope=request.scope,
            redirect_uri=self.redirect_uri(request.redirect_uri),
            state=request.state,
            given_name=request.given_name,
            family_name=request.family_name,
            middle_name=request.middle_name,
            nickname=request.nickname,
            gender=request.gender,
            birthdate=request.birthdate,
            picture=request.picture,
            is_multi_factor_auth_enabled=request.is_multi_factor_auth_enabled,
            app_data=request.app_data or {},
        )
        run = FlowRun(self, caller)
        try:
            result = await run.run(SignupMachine(self.env), event)
        except InvalidArgument:
            # The spec's duplicate message wins over the machine's vague one (README).
            if run.taken == "email":
                raise InvalidArgument("user with given email already exists") from None
            if run.taken == "phone_number":
                raise InvalidArgument("user with given phone number already exists") from None
            raise
        reply = self.reply(result, run)
        pending = isinstance(result, AuthResponse) and result.access_token is None
        if request.email and pending and run.user_id is not None:
            # A verification is pending, and this browser chose the password: following
            # the link from here keeps it (see the verification machine).
            reply = Reply(reply.body, (*reply.cookies, self.signers.cookie(run.user_id)))
        return reply

    def _throttle_keys(self, identifier: str, caller: CallerContext) -> tuple[str, str]:
        who = _digest(identifier)
        return f"throttle:login:{who}:{caller.client_ip}", f"throttle:login:{who}"

    async def _reserve_login(self, keys: tuple[str, str], known_device: bool) -> list[str]:
        """Take this attempt out of the budgets BEFORE the password hash is checked
        (increment, then compare: parallel attempts can never pass a limit); a refused
        attempt gives its reservation back at once. A client that signed in to this
        account before (its device cookie) is held to the per-address budget only, so a
        stranger exhausting the account's budget cannot lock the owner out."""
        memory = self.storage.memory
        budgets = [(keys[0], LOGIN_FAILURES_PER_ADDRESS, LOGIN_FAILURES_PER_ADDRESS_WINDOW)]
        if not known_device:
            budgets.append(
                (keys[1], LOGIN_FAILURES_PER_IDENTIFIER, LOGIN_FAILURES_PER_IDENTIFIER_WINDOW)
            )
        reserved: list[str] = []
        for key, limit, window in budgets:
            reserved.append(key)
            if await memory.incr(key, ttl=window) > limit:
                await self._give_back(reserved)
                raise ResourceExhausted(INVALID_CREDENTIALS, retry_after=window)
        return reserved

    async def _give_back(self, keys: list[str]) -> None:
        for key in keys:
            await self.storage.memory.incr(key, -1)

    async def _give_back_after(self, keys: list[str]) -> None:
        """Give the reservation back once the flow has committed (issue 27): a memory
        store failing now must not turn a sign-in that happened into an error, whose retry
        would sign in (and audit, and mail a code) again. The reservation then stays
        counted until its window ends."""
        try:
            await self._give_back(keys)
        except StorageUnavailable as exc:
            log.warning("login reservation not given back: %s", exc)

    async def login(self, request: LoginRequest, caller: CallerContext) -> Reply:
        email, phone = request.email, request.phone_number
        event = LoginRequested(
            email=email,
            phone_number=phone,
            password=request.password,
            roles=request.roles,
            scope=request.scope,
            state=request.state,
        )
        identifier = normalise_email(email) if email else (phone or "").strip()
        if has_control_character(identifier):
            raise InvalidArgument("invalid email" if email else "invalid phone number")
        reserved: list[str] = []
        kind = "email" if email else "phone"
        if identifier:
            known = self.devices.recognises(caller, identifier)
            try:
                keys = self._throttle_keys(identifier, caller)
                reserved = await self._reserve_login(keys, known)
            except ResourceExhausted:
                self.record_login(kind, "throttled")
                raise
        run = FlowRun(self, caller)
        try:
            result = await run.run(LoginMachine(self.env), event)
        except Unauthenticated:
            # A wrong password keeps its reservation; unknown identifiers count exactly
            # like known ones: nothing tells them apart.
            self.record_login(kind, "refused")
            raise
        except BaseException:
            await self._give_back(reserved)
            raise
        await self._give_back_after(reserved)
        signed_in = isinstance(result, AuthResponse) and result.access_token is not None
        self.record_login(kind, "signed_in" if signed_in else "second_factor")
        reply = self.reply(result, run)
        if identifier and run.user_id is not None:
            device = self.devices.cookie(run.user_id, identifier=identifier)
            reply = Reply(reply.body, (*reply.cookies, device))
        return reply

    # -- the second factor -------------------------------------------------------------------

    async def verify_otp(self, request: VerifyOtpRequest, caller: CallerContext) -> Reply:
        """Finish the challenge named by the ``mfa`` cookie with its code."""
        event = VerifyOtpRequested(
            challenge_id=self.cookies.presented_mfa(caller),
            code=request.otp,
            is_totp=request.is_totp,
            email=request.email,
            phone_number=request.phone_number,
        )
        run = FlowRun(self, caller)
        return self.reply(await run.run(MfaMachine(self.env), event), run)

    async def resend_otp(self, request: ResendOtpRequest, caller: CallerContext) -> Reply:
        """Replace the challenge named by the ``mfa`` cookie; the old code dies with it."""
        event = ResendOtpRequested(
            challenge_id=self.cookies.presented_mfa(caller),
            email=request.email,
            phone_number=request.phone_number,
        )
        run = FlowRun(self, caller)
        return self.reply(await run.run(MfaMachine(self.env), event), run)

    # -- emailed links ------------------------------------------------------------------------

    async def _throttle_mails(self, email: str) -> None:
        """At most :data:`MAILS_PER_ADDRESS` mailed links per address and window, for
        known and unknown addresses alike: asking needs no password, so anyone could
        otherwise flood a mailbox (and the operator's sender reputation)."""
        address = normalise_email(email)
        if not is_valid_email(address):
            return  # no mail can go there: the flow refuses it
        key = f"throttle:mail:{_digest(address)}"
        memory = self.storage.memory
        if await memory.incr(key, ttl=MAILS_PER_ADDRESS_WINDOW) > MAILS_PER_ADDRESS:
            await memory.incr(key, -1)
            raise ResourceExhausted(TOO_MANY_MAILS, retry_after=MAILS_PER_ADDRESS_WINDOW)

    async def magic_link_login(
        self, request: MagicLinkLoginRequest, caller: CallerContext
    ) -> Reply:
        await self._throttle_mails(request.email)
        event = MagicLinkRequested(
            email=request.email,
            roles=request.roles,
            scope=request.scope,
            state=request.state,
            redirect_uri=self.redirect_uri(request.redirect_uri),
        )
        return await self.mailed_links.answer(Flow.MAGIC_LINK_LOGIN, event, caller)

    async def verify_email(self, request: VerifyEmailRequest, caller: CallerContext) -> Reply:
        token = request.token
        if not token:
            raise InvalidArgument("invalid verification token")
        event = VerifyEmailRequested(
            token=token,
            state=request.state,
            roles=request.roles,
            scope=request.scope,
            signer=self.signers.account(caller),
        )
        run = FlowRun(self, caller)
        return self.reply(await run.run(VerificationMachine(self.env), event), run)

    async def resend_verify_email(
        self, request: ResendVerifyEmailRequest, caller: CallerContext
    ) -> Reply:
        await self._throttle_mails(request.email)
        event = ResendVerifyEmailRequested(
            email=request.email,
            identifier=request.identifier,
            state=request.state,
        )
        return await self.mailed_links.answer(Flow.RESEND_VERIFY_EMAIL, event, caller)

    async def forgot_password(self, request: ForgotPasswordRequest, caller: CallerContext) -> Reply:
        event = ForgotPasswordRequested(
            email=request.email,
            phone_number=request.phone_number,
            state=request.state,
            redirect_uri=self.redirect_uri(request.redirect_uri),
        )
        phone = (event.phone_number or "").strip()
        if phone and not (event.email or "").strip() and self.policy.sms_enabled:
            await self._throttle_reset_texts(phone)
            # By phone the answer carries the challenge cookie: the flow runs now.
            run = FlowRun(self, caller)
            return self.reply(await run.run(PasswordResetMachine(self.env), event), run)
        await self._throttle_mails(event.email or "")
        return await self.mailed_links.answer(Flow.FORGOT_PASSWORD, event, caller)

    async def _throttle_reset_texts(self, phone: str) -> None:
        """One reset code per number every ``RESEND_INTERVAL`` s, for known and unknown
        numbers alike: asking needs no password, so anyone could otherwise text a number
        (at the operator's cost) as fast as the rate limit allows."""
        key = f"throttle:reset_sms:{_digest(phone)}"
        if not await self.storage.memory.set_if_absent(key, b"1", ttl=otp.RESEND_INTERVAL):
            raise ResourceExhausted(RESEND_TOO_SOON, retry_after=otp.RESEND_INTERVAL)

    async def reset_password(self, request: ResetPasswordRequest, caller: CallerContext) -> Reply:
        event = ResetPasswordRequested(
            challenge_id=self.cookies.presented_mfa(caller),
            token=request.token,
            otp=request.otp,
            phone_number=request.phone_number,
            password=request.password,
            confirm_password=request.confirm_password,
        )
        run = FlowRun(self, caller)
        return self.reply(await run.run(PasswordResetMachine(self.env), event), run)

    # -- sessions -----------------------------------------------------------------------------

    async def session(self, request: SessionRequest, caller: CallerContext) -> Reply:
        """Fresh tokens from the session cookie ONLY (a bearer token is not enough); the
        cookie rotates and the old one stops working."""
        cookie = self.cookies.presented(caller)
        if not cookie:
            raise Unauthenticated("unauthorized")
        claims = self.cookies.open(cookie)
        if claims is None or not await self.sessions.accepts(
            str(claims.get("sub")), claims.get("iat")
        ):
            raise Unauthenticated("unauthorized")
        event = SessionRequested(
            cookie=cookie,
            claims=claims,
            roles=request.roles,
            scope=request.scope,
            state=request.state,
            required_relations=request.required_relations,
        )
        run = FlowRun(self, caller, sid=str(claims.get("sid", "")))
        return self.reply(await run.run(SessionMachine(self.env), event), run)

    async def refresh(self, refresh_token: str, caller: CallerContext) -> Reply:
        """The ``refresh_token`` grant of ``POST /oauth/token``: rotate, within the grace
        window tolerate the just-replaced token, after it treat reuse as theft."""
        claims = self._verified(refresh_token)
        if claims is not None and not await self.sessions.accepts(
            str(claims.get("sub")), claims.get("iat")
        ):
            raise Unauthenticated("Invalid refresh token")
        event = RefreshRequested(refresh_token=refresh_token, claims=claims)
        sid = "" if claims is None else str(claims.get("sid", ""))
        run = FlowRun(self, caller, sid=sid, refresh=True)
        return self.reply(await run.run(SessionMachine(self.env), event), run)

    async def revoke(self, request: RevokeRequest, caller: CallerContext) -> Reply:
        token = request.refresh_token
        if not token:
            raise InvalidArgument("invalid token")
        claims = self._verified(token)
        sid = "" if claims is None else str(claims.get("sid", ""))
        run = FlowRun(self, caller, sid=sid)
        event = RevokeRequested(refresh_token=token, claims=claims)
        return self.reply(await run.run(SessionMachine(self.env), event), run)

    async def revoke_token(self, token: str, caller: CallerContext) -> None:
        """RFC 7009 revocation: a refresh token as ``revoke`` does; an access token ends
        its session. Unknown, forged or already revoked tokens are no error."""
        claims = self._verified(token)
        if claims is None:
            return
        if claims.get("token_type") == TokenType.ACCESS:
            who = await self._from_stored(claims, ACCESS, token)
            if who is not None:
                await self.sessions.delete(who.user_id, who.sid, who.nonce)
            return
        with contextlib.suppress(ClientError):
            await self.revoke(RevokeRequest(refresh_token=token), caller)

    async def undo_email_change(
        self, request: UndoEmailChangeRequest, caller: CallerContext
    ) -> Reply:
        """Put back the address an email change replaced (the link mailed to it)."""
        return await undo_email_change(self, request.token, caller)

    async def logout(self, request: LogoutRequest, caller: CallerContext) -> Reply:
        who = await self.authenticate(caller)
        ref = None
        if who is not None:
            ref = SessionRef(user_id=who.user_id, login_method=who.login_method, nonce=who.nonce)
        run = FlowRun(self, caller, sid=None if who is None else who.sid)
        return self.reply(
            await run.run(SessionMachine(self.env), LogoutRequested(session=ref)), run
        )
