"""MFA enrolment operations (Authorizer's newer API), one per surface call; the rules are
those of :mod:`core.state_machines.mfa_setup`, the challenge a setup issues is the MFA
flow's (the driver hands the parked setup to it). Without an ``mfa`` cookie, a setup
continues the caller's signed-in session (rule 2b), with whether a second factor
completed it recently."""

from __future__ import annotations

from bastion.core.state_machines.mfa_setup import (
    MfaSetupMachine,
    MfaSetupRequested,
    SetupKind,
    SignedIn,
)
from bastion.service.auth.account import AccountOperations
from bastion.service.auth.driver import FlowRun
from bastion.service.auth.mfa_selfservice import has_fresh_factor
from bastion.service.auth.requests import MfaSetupRequest, SkipMfaSetupRequest
from bastion.service.context import CallerContext, Reply

__all__ = ["MfaSetupOperations"]


class MfaSetupOperations(AccountOperations):
    """The ``*_mfa_setup``, ``skip_mfa_setup`` and ``lock_mfa`` operations of
    :class:`service.auth.service.AuthService`, each continuing the login the ``mfa``
    cookie names."""

    async def _setup(
        self, kind: SetupKind, request: MfaSetupRequest | SkipMfaSetupRequest, caller: CallerContext
    ) -> Reply:
        challenge_id = self.cookies.presented_mfa(caller)
        signed_in = None
        if not challenge_id and kind.method is not None:
            who = await self.authenticate(caller)
            if who is not None:
                fresh = await has_fresh_factor(self.storage.memory, who.sid)
                signed_in = SignedIn(user_id=who.user_id, roles=who.roles, fresh_factor=fresh)
        event = MfaSetupRequested(
            kind=kind,
            challenge_id=challenge_id,
            signed_in=signed_in,
            email=request.email,
            phone_number=request.phone_number,
            mfa=self.mfa_policy,
        )
        run = FlowRun(self, caller)
        result = await run.run(MfaSetupMachine(self.env), event)
        body = result.to_api_dict()
        if kind in (SetupKind.EMAIL_OTP, SetupKind.SMS_OTP):
            # Authorizer's answer is a bare message on every surface (gRPC's message has
            # no other field): "a code was sent", the verify_otp screen being implied.
            body = {"message": body["message"]}
        return Reply(body, tuple(run.cookies))

    async def email_otp_mfa_setup(self, request: MfaSetupRequest, caller: CallerContext) -> Reply:
        return await self._setup(SetupKind.EMAIL_OTP, request, caller)

    async def sms_otp_mfa_setup(self, request: MfaSetupRequest, caller: CallerContext) -> Reply:
        return await self._setup(SetupKind.SMS_OTP, request, caller)

    async def totp_mfa_setup(self, request: MfaSetupRequest, caller: CallerContext) -> Reply:
        return await self._setup(SetupKind.TOTP, request, caller)

    async def skip_mfa_setup(self, request: SkipMfaSetupRequest, caller: CallerContext) -> Reply:
        return await self._setup(SetupKind.SKIP, request, caller)

    async def lock_mfa(self, request: MfaSetupRequest, caller: CallerContext) -> Reply:
        return await self._setup(SetupKind.LOCK, request, caller)
