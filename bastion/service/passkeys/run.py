"""The passkey flow's driver: :class:`~service.auth.driver.FlowRun` plus the effects of
:mod:`core.state_machines.passkey_effects` (memory-store ceremonies, SQL credentials,
the library's verdicts)."""

from __future__ import annotations

from bastion.core.auth.passkeys import Ceremony
from bastion.core.state_machines._machine import Effect, Event
from bastion.core.state_machines.passkey_effects import (
    CeremonyTaken,
    CredentialLoaded,
    CredentialsLoaded,
    CredentialStored,
    CredentialUseRecorded,
    LoadCredential,
    LoadCredentials,
    RecordCredentialUse,
    StoreCeremony,
    StoreCredential,
    TakeCeremony,
    VerifyAssertion,
    VerifyAttestation,
)
from bastion.service.auth.driver import FlowRun
from bastion.service.auth.parts import AuthParts
from bastion.service.context import CallerContext
from bastion.service.passkeys.relying_party import RelyingParty
from bastion.storage import passkeys as rows

__all__ = ["PasskeyRun", "ceremony_key"]


def ceremony_key(challenge: str) -> str:
    return f"webauthn:{challenge}"


class PasskeyRun(FlowRun):
    def __init__(self, auth: AuthParts, caller: CallerContext, rp: RelyingParty) -> None:
        super().__init__(auth, caller)
        self.rp = rp

    async def _answer(self, effect: Effect) -> Event:
        db, now = self.auth.storage.db, self._now
        if isinstance(effect, TakeCeremony):
            raw = await self.auth.storage.memory.take(ceremony_key(effect.challenge))
            return CeremonyTaken(ceremony=None if raw is None else Ceremony.from_json(raw))
        if isinstance(effect, LoadCredentials):
            user_id = effect.user_id
            return CredentialsLoaded(credentials=await db.read(lambda c: rows.for_user(c, user_id)))
        if isinstance(effect, LoadCredential):
            cid = effect.credential_id
            return CredentialLoaded(
                credential=await db.read(lambda c: rows.by_credential_id(c, cid))
            )
        if isinstance(effect, VerifyAttestation):
            return self.rp.verify_attestation(effect, row_id=self.auth.ids.new_id(), now=now)
        if isinstance(effect, VerifyAssertion):
            return self.rp.verify_assertion(effect)
        if isinstance(effect, StoreCredential):
            credential = effect.credential
            ok = await db.run(lambda c: rows.insert(c, credential), write=True)
            return CredentialStored(ok=ok)
        if isinstance(effect, RecordCredentialUse):
            e = effect
            ok = await db.run(
                lambda c: rows.record_use(
                    c,
                    e.credential.id,
                    previous=e.previous,
                    sign_count=e.sign_count,
                    backed_up=e.backed_up,
                    now=e.at,
                ),
                write=True,
            )
            return CredentialUseRecorded(ok=ok)
        return await super()._answer(effect)

    async def _do(self, effect: Effect) -> None:
        if isinstance(effect, StoreCeremony):
            ceremony = effect.ceremony
            ttl = max(1, ceremony.expires_at - self._now)
            await self.auth.storage.memory.set(
                ceremony_key(ceremony.challenge), ceremony.to_json(), ttl=ttl
            )
            return
        await super()._do(effect)
