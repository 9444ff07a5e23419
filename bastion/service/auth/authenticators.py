"""Carries out the MFA flow's authenticator effects against SQL.

The driver hands every effect of :data:`AUTHENTICATOR_EFFECTS` to
:meth:`AuthenticatorStore.execute` and feeds the returned event back to the machine.
Spending a code (``RecordTotpStep``, ``UseRecoveryCode``) is a write of the flow's final
transaction, queued by the driver itself (:mod:`bastion.service.auth.driver`).
Secrets are sealed with :class:`~bastion.service.secretbox.SecretBox` (key derived from
``--client-secret``, bound to the user id) before they reach the database and opened
only here; recovery codes are stored as digests. The compare-and-set guarantees
:mod:`core.state_machines.mfa_effects` asks for come from :mod:`storage.authenticators`.
"""

from __future__ import annotations

import sqlalchemy as sa

from bastion.core.auth import totp
from bastion.core.auth.totp import Authenticator
from bastion.core.ports import Clock, IdSource, Randomness
from bastion.core.state_machines._machine import Effect, Event
from bastion.core.state_machines.mfa_effects import (
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    EnrolAuthenticator,
    FactorsLoaded,
    LoadAuthenticator,
    LoadFactors,
)
from bastion.service.secretbox import SecretBox, SecretBoxError
from bastion.storage import authenticators as rows
from bastion.storage import passkeys as passkey_rows
from bastion.storage.sql.database import Database

__all__ = ["AUTHENTICATOR_EFFECTS", "AuthenticatorStore"]

AUTHENTICATOR_EFFECTS = (LoadAuthenticator, EnrolAuthenticator, LoadFactors)


class AuthenticatorStore:
    def __init__(
        self,
        db: Database,
        box: SecretBox,
        *,
        randomness: Randomness,
        clock: Clock,
        ids: IdSource,
    ) -> None:
        self._db = db
        self._box = box
        self._randomness = randomness
        self._clock = clock
        self._ids = ids

    async def execute(self, effect: Effect) -> Event:
        """Carry out one of :data:`AUTHENTICATOR_EFFECTS`; its reply event."""
        now = int(self._clock.now())
        if isinstance(effect, LoadAuthenticator):
            return AuthenticatorLoaded(authenticator=await self.load(effect.user_id))
        if isinstance(effect, EnrolAuthenticator):
            return await self.enrol(effect.user_id, now)
        if isinstance(effect, LoadFactors):
            return await self.factors(effect.user_id)
        raise TypeError(f"not an authenticator effect: {type(effect).__name__}")

    async def load(self, user_id: str) -> Authenticator | None:
        stored = await self._db.run(lambda conn: rows.load(conn, user_id))
        if stored is None:
            return None
        try:
            secret, current = self._box.open_current(stored.sealed_secret, owner=user_id)
        except SecretBoxError:
            return None  # sealed under another key: as good as none, never an error
        if not current:  # a client-secret rotation: sealed again under the new key
            old, new = stored.sealed_secret, self._box.seal(secret, owner=user_id)
            await self._db.run_locked(
                f"authenticator:{user_id}", lambda conn: rows.reseal(conn, user_id, old, new)
            )
        return Authenticator(
            user_id=user_id,
            secret=secret,
            verified=stored.verified,
            last_used_step=stored.last_used_step,
            recovery_digests=stored.recovery_digests,
        )

    async def factors(self, user_id: str) -> FactorsLoaded:
        """Has the user a verified authenticator, a passkey? (one read)"""

        def read(conn: sa.Connection) -> FactorsLoaded:
            stored = rows.load(conn, user_id)
            return FactorsLoaded(
                verified_authenticator=stored is not None and stored.verified,
                passkey=passkey_rows.has_any(conn, user_id),
            )

        return await self._db.read(read)

    async def enrol(self, user_id: str, now: int) -> AuthenticatorEnrolled:
        secret = totp.new_secret(self._randomness)
        codes = totp.new_recovery_codes(self._randomness)
        sealed = self._box.seal(secret, owner=user_id)
        digests = tuple(totp.recovery_digest(code) for code in codes)
        row_id = self._ids.new_id()
        await self._db.run_locked(
            f"authenticator:{user_id}",
            lambda conn: rows.enrol(
                conn,
                row_id=row_id,
                user_id=user_id,
                sealed_secret=sealed,
                recovery_digests=digests,
                now=now,
            ),
        )
        return AuthenticatorEnrolled(secret=secret, recovery_codes=codes)
