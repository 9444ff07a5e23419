"""Passkey operations, named as Authorizer's newer API names them (``authorizer-proto``
0.2.0: ``webauthn_registration_options`` ... ``webauthn_delete_credential``), plus
bastion's own: renaming a passkey, and an admin listing and deleting a user's.

The ceremonies run :class:`~core.state_machines.passkey.PasskeyMachine`; the listing,
renaming and deleting are single statements, each committed with its audit row and
webhook in one transaction.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa

from bastion.core.auth.passkeys import PasskeyOptions, client_challenge, credential_id_of
from bastion.core.auth.user import User
from bastion.core.errors import FailedPrecondition, Internal, InvalidArgument, NotFound
from bastion.core.state_machines._machine import Event, Machine
from bastion.core.state_machines.effects import AuditAction, AuditRecord, Result
from bastion.core.state_machines.passkey import (
    PasskeyMachine,
    RegistrationVerifyRequested,
    SignInVerifyRequested,
)
from bastion.core.state_machines.passkey_options import (
    PasskeyOptionsMachine,
    RegistrationOptionsRequested,
    SignInOptionsRequested,
)
from bastion.service.auth.flow_sql import audit_entry
from bastion.service.auth.mfa_selfservice import has_fresh_factor
from bastion.service.auth.service import AuthService
from bastion.service.context import CallerContext, Reply
from bastion.service.passkeys.relying_party import RelyingParty
from bastion.service.passkeys.run import PasskeyRun
from bastion.service.requests import EmptyRequest
from bastion.storage import passkeys as rows
from bastion.storage import users as user_rows
from bastion.storage.audit import record
from bastion.storage.outbox import enqueue

__all__ = [
    "AdminDeletePasskeyRequest",
    "AdminPasskeysRequest",
    "DeleteCredentialRequest",
    "LoginOptionsRequest",
    "LoginVerifyRequest",
    "PasskeyService",
    "RegistrationOptionsRequest",
    "RegistrationVerifyRequest",
    "RenameCredentialRequest",
]

DISABLED = "passkeys are not enabled on this server"
NOT_FOUND = "passkey not found"
DELETED = "Passkey deleted successfully"
RENAMED = "Passkey renamed successfully"


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationOptionsRequest:
    #: Authorizer's MFA-setup path names the user; bastion registers for the caller only
    email: str | None = None
    phone_number: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationVerifyRequest:
    credential: str = ""
    name: str | None = None
    email: str | None = None
    phone_number: str | None = None
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginOptionsRequest:
    email: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginVerifyRequest:
    credential: str = ""
    state: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteCredentialRequest:
    id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameCredentialRequest:
    id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminPasskeysRequest:
    user_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminDeletePasskeyRequest:
    user_id: str = ""
    id: str = ""


class AdminGate(Protocol):
    async def require_admin(self, caller: CallerContext) -> None: ...


class PasskeyService:
    def __init__(self, auth: AuthService, admin: AdminGate) -> None:
        self.auth = auth
        self.admin = admin
        self.settings = auth.settings

    @functools.cached_property
    def rp(self) -> RelyingParty:
        return RelyingParty(self.settings)

    def _enabled(self) -> None:
        if not self.settings.enable_passkeys:
            raise FailedPrecondition(DISABLED)

    async def _run(
        self, machine: Machine[Any], event: Event, caller: CallerContext
    ) -> tuple[Result, PasskeyRun]:
        run = PasskeyRun(self.auth, caller, self.rp)
        return await run.run(machine, event), run

    async def _options(self, event: Event, caller: CallerContext) -> Reply:
        result, run = await self._run(PasskeyOptionsMachine(self.auth.env), event, caller)
        if not isinstance(result, PasskeyOptions):
            raise Internal("the passkey flow answered options with something else")
        return Reply({"options": self.rp.render(result)}, tuple(run.cookies))

    async def _verify(self, event: Event, caller: CallerContext) -> Reply:
        result, run = await self._run(PasskeyMachine(self.auth.env), event, caller)
        return self.auth.reply(result, run)

    # -- Authorizer's operations --------------------------------------------------------------

    async def webauthn_registration_options(
        self, request: RegistrationOptionsRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        who = await self.auth.require_caller(caller)
        event = RegistrationOptionsRequested(
            user_id=who.user_id,
            challenge=self.rp.new_challenge(),
            proved_at=who.auth_time,
            window=self.settings.recent_sign_in_seconds,
            fresh_factor=await has_fresh_factor(self.auth.storage.memory, who.sid),
        )
        return await self._options(event, caller)

    async def webauthn_registration_verify(
        self, request: RegistrationVerifyRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        who = await self.auth.require_caller(caller)
        event = RegistrationVerifyRequested(
            user_id=who.user_id,
            challenge=client_challenge(request.credential),
            response=request.credential,
            name=(request.name or "").strip(),
        )
        return await self._verify(event, caller)

    async def webauthn_login_options(
        self, request: LoginOptionsRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        event = SignInOptionsRequested(
            challenge=self.rp.new_challenge(),
            email=request.email,
            mfa_challenge_id=self.auth.cookies.presented_mfa(caller),
        )
        return await self._options(event, caller)

    async def webauthn_login_verify(
        self, request: LoginVerifyRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        event = SignInVerifyRequested(
            challenge=client_challenge(request.credential),
            credential_id=credential_id_of(request.credential),
            response=request.credential,
            mfa_challenge_id=self.auth.cookies.presented_mfa(caller),
            state=request.state,
        )
        return await self._verify(event, caller)

    async def webauthn_credentials(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        self._enabled()
        who = await self.auth.require_caller(caller)
        return await self._listing(who.user_id)

    async def webauthn_delete_credential(
        self, request: DeleteCredentialRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        who = await self.auth.require_caller(caller)
        await self._delete(who.user_id, request.id, caller, actor_id=who.user_id)
        return Reply({"message": DELETED})

    # -- bastion's own ------------------------------------------------------------------------

    async def webauthn_rename_credential(
        self, request: RenameCredentialRequest, caller: CallerContext
    ) -> Reply:
        self._enabled()
        who = await self.auth.require_caller(caller)
        name = request.name.strip()
        if not request.id or not name:
            raise InvalidArgument("id and name are required")
        now, user_id = int(self.auth.clock.now()), who.user_id
        effect = AuditRecord(
            action=AuditAction.PASSKEY_RENAMED,
            actor_id=user_id,
            resource_id=user_id,
            metadata={"credential": request.id, "name": name},
        )
        entry = audit_entry(effect, caller)

        def rename(conn: sa.Connection) -> bool:
            if not rows.rename(conn, user_id, request.id, name, now=now):
                return False
            record(conn, entry, now=now)
            return True

        if not await self.auth.storage.db.run(rename, write=True):
            raise NotFound(NOT_FOUND)
        return Reply({"message": RENAMED})

    async def admin_webauthn_credentials(
        self, request: AdminPasskeysRequest, caller: CallerContext
    ) -> Reply:
        await self.auth_admin(caller)
        if not request.user_id:
            raise InvalidArgument("user_id is required")
        return await self._listing(request.user_id)

    async def admin_webauthn_delete_credential(
        self, request: AdminDeletePasskeyRequest, caller: CallerContext
    ) -> Reply:
        await self.auth_admin(caller)
        if not request.user_id:
            raise InvalidArgument("user_id is required")
        await self._delete(request.user_id, request.id, caller, actor_id="admin")
        return Reply({"message": DELETED})

    # -- shared -------------------------------------------------------------------------------

    async def auth_admin(self, caller: CallerContext) -> None:
        """The admin's secret first: nothing about this server is told to a stranger."""
        await self.admin.require_admin(caller)
        self._enabled()

    async def _listing(self, user_id: str) -> Reply:
        found = await self.auth.storage.db.read(lambda c: rows.for_user(c, user_id))
        return Reply({"webauthn_credentials": [c.to_api_dict() for c in found]})

    async def _delete(
        self, user_id: str, row_id: str, caller: CallerContext, *, actor_id: str
    ) -> None:
        if not row_id:
            raise InvalidArgument("id is required")
        now = int(self.auth.clock.now())
        listening = await self.auth.storage.webhook_listeners.listening("user.passkey_deleted")

        def delete(conn: sa.Connection) -> bool:
            gone = rows.delete(conn, user_id, row_id)
            if gone is None:
                return False
            user = user_rows.get_by_id(conn, user_id)
            effect = AuditRecord(
                action=AuditAction.PASSKEY_DELETED,
                actor_id=actor_id,
                actor_email=None if user is None or actor_id == "admin" else user.email,
                resource_id=user_id,
                metadata={"credential": gone.id, "name": gone.name},
            )
            record(conn, audit_entry(effect, caller), now=now)
            if listening and user is not None:
                enqueue(conn, "webhook_event", _webhook(user), now=now)
            return True

        if not await self.auth.storage.db.run(delete, write=True):
            raise NotFound(NOT_FOUND)


def _webhook(user: User) -> dict[str, Any]:
    return {
        "event_name": "user.passkey_deleted",
        "user": user.to_api_dict(),
        "auth_recipe": "webauthn",
    }
