"""Passkeys (WebAuthn), first half: a challenge is issued. The second half, verifying
the answer, is :mod:`core.state_machines.passkey`.

Rules / theory of operation
---------------------------
1. Registration is for a signed-in user whose session signed in or passed a second
   factor within ``--recent-sign-in-seconds`` (as for changing the recovery address),
   else PermissionDenied. Their passkeys are excluded (one credential per authenticator).
2. Sign-in with the ``mfa`` cookie is the SECOND FACTOR of the parked password login:
   the challenge must be live and for a login (else Unauthenticated "invalid session"),
   and the user must have a passkey (else FailedPrecondition); only theirs are allowed.
3. Without it, PASSWORDLESS, user verification required: with an email, that user's
   passkeys are allowed (an unknown email, or one without passkeys, gets options that
   allow none: nothing tells them apart); without one, any discoverable credential.
4. The ceremony is stored under its challenge for ``CEREMONY_TTL`` seconds, then the
   options are the answer.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.mfa import Challenge, Purpose
from bastion.core.auth.mfa_settings import FRESH_FACTOR_WINDOW
from bastion.core.auth.passkeys import (
    ALLOW_NONE,
    CEREMONY_TTL,
    Ceremony,
    CeremonyKind,
    PasskeyCredential,
    PasskeyOptions,
)
from bastion.core.auth.user import User, normalise_email
from bastion.core.errors import FailedPrecondition, PermissionDenied, Unauthenticated
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import Fail, LoadUser, Respond
from bastion.core.state_machines.events import UserLoaded
from bastion.core.state_machines.mfa_effects import ChallengeLoaded, LoadChallenge
from bastion.core.state_machines.passkey_effects import (
    CredentialsLoaded,
    LoadCredentials,
    StoreCeremony,
)

__all__ = [
    "PasskeyOptionsMachine",
    "RegistrationOptionsRequested",
    "SignInOptionsRequested",
    "State",
    "live_login",
]

NOT_FRESH = "adding a passkey needs a recent sign-in or second factor: sign in again"
INVALID_SESSION = "invalid session"
NO_PASSKEY = "no passkey is registered for this account"


class State(enum.Enum):
    START = "start"
    #: registration: waiting for the user
    LOADING_USER = "loading_user"
    #: waiting for the credentials to exclude or allow
    LOADING_CREDENTIALS = "loading_credentials"
    #: second factor: waiting for the pending MFA challenge
    LOADING_CHALLENGE = "loading_challenge"
    #: passwordless by email: waiting for that user
    LOADING_NAMED_USER = "loading_named_user"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationOptionsRequested(Event):
    user_id: str
    #: the new challenge (random, base64url; drawn by the driver)
    challenge: str
    #: when the caller's session last proved a password or second factor
    proved_at: int
    #: how recent that proof must be (``--recent-sign-in-seconds``)
    window: int = FRESH_FACTOR_WINDOW
    #: a second factor completed this session family within the window
    fresh_factor: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SignInOptionsRequested(Event):
    challenge: str
    email: str | None = None
    #: the ``mfa`` cookie: the sign-in is the second factor of that login
    mfa_challenge_id: str | None = None


TABLE: Table[State] = {
    (State.START, RegistrationOptionsRequested): edge(
        "_on_registration_options", State.LOADING_USER, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.LOADING_CREDENTIALS, State.FAILED),
    (State.START, SignInOptionsRequested): edge(
        "_on_sign_in_options", State.LOADING_CHALLENGE, State.LOADING_NAMED_USER, State.DONE
    ),
    (State.LOADING_CHALLENGE, ChallengeLoaded): edge(
        "_on_mfa_challenge", State.LOADING_CREDENTIALS, State.FAILED
    ),
    (State.LOADING_NAMED_USER, UserLoaded): edge(
        "_on_named_user", State.LOADING_CREDENTIALS, State.DONE
    ),
    (State.LOADING_CREDENTIALS, CredentialsLoaded): edge(
        "_on_credentials", State.DONE, State.FAILED
    ),
}


def live_login(challenge: Challenge | None, challenge_id: str, now: float) -> bool:
    """Is ``challenge`` the pending second factor of a password login named by the cookie?"""
    if challenge is None or challenge.purpose is not Purpose.LOGIN:
        return False
    return challenge.id == challenge_id and challenge.expires_at > now


@dataclasses.dataclass(slots=True, kw_only=True)
class OptionsContext:
    ceremony: Ceremony | None = None
    user: User | None = None
    #: second factor: the ``mfa`` cookie, and the challenge drawn for the ceremony
    mfa_challenge_id: str = ""
    pending_challenge: str = ""


class PasskeyOptionsMachine(Machine[State]):
    FLOW = "passkey_options"
    STATES = State
    TABLE = TABLE
    CONTEXT = OptionsContext
    EMITS = frozenset({Fail, LoadChallenge, LoadCredentials, LoadUser, Respond, StoreCeremony})
    ctx: OptionsContext

    def _expiry(self) -> int:
        return int(self._env.now()) + CEREMONY_TTL

    def _on_registration_options(
        self, event: RegistrationOptionsRequested
    ) -> tuple[list[Effect], State]:
        recent = self._env.now() - event.proved_at <= event.window
        if not (recent or event.fresh_factor):
            return self._fail(PermissionDenied, NOT_FRESH)
        self.ctx.ceremony = Ceremony(
            challenge=event.challenge,
            kind=CeremonyKind.REGISTER,
            user_id=event.user_id,
            # the options require it: a registration without it is refused
            user_verification=True,
            expires_at=self._expiry(),
        )
        return [LoadUser(user_id=event.user_id)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        if event.user is None or event.user.is_revoked:
            return self._fail(Unauthenticated, "unauthorized")
        self.ctx.user = event.user
        return [LoadCredentials(user_id=event.user.id)], State.LOADING_CREDENTIALS

    def _on_sign_in_options(self, event: SignInOptionsRequested) -> tuple[list[Effect], State]:
        if event.mfa_challenge_id:
            self.ctx.mfa_challenge_id = event.mfa_challenge_id
            self.ctx.pending_challenge = event.challenge
            return [LoadChallenge(challenge_id=event.mfa_challenge_id)], State.LOADING_CHALLENGE
        ceremony = Ceremony(
            challenge=event.challenge,
            kind=CeremonyKind.PASSWORDLESS,
            user_verification=True,
            expires_at=self._expiry(),
        )
        self.ctx.ceremony = ceremony
        email = normalise_email(event.email or "")
        if email:
            return [LoadUser(email=email)], State.LOADING_NAMED_USER
        return self._options(ceremony, ()), State.DONE

    def _on_mfa_challenge(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        challenge = event.challenge
        if challenge is None or not live_login(
            challenge, self.ctx.mfa_challenge_id, self._env.now()
        ):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.ceremony = Ceremony(
            challenge=self.ctx.pending_challenge,
            kind=CeremonyKind.SECOND_FACTOR,
            user_id=challenge.user_id,
            mfa_challenge_id=challenge.id,
            expires_at=self._expiry(),
        )
        return [LoadCredentials(user_id=challenge.user_id)], State.LOADING_CREDENTIALS

    def _on_named_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        ceremony = self._require(self.ctx.ceremony)
        if event.user is None or event.user.is_revoked:
            nobody = dataclasses.replace(ceremony, allowed=ALLOW_NONE)
            self.ctx.ceremony = nobody
            return self._options(nobody, ()), State.DONE
        self.ctx.ceremony = dataclasses.replace(ceremony, user_id=event.user.id)
        return [LoadCredentials(user_id=event.user.id)], State.LOADING_CREDENTIALS

    def _on_credentials(self, event: CredentialsLoaded) -> tuple[list[Effect], State]:
        ceremony = self._require(self.ctx.ceremony)
        if ceremony.kind is CeremonyKind.REGISTER:
            return self._options(ceremony, event.credentials), State.DONE
        if not event.credentials:
            if ceremony.kind is CeremonyKind.SECOND_FACTOR:
                return self._fail(FailedPrecondition, NO_PASSKEY)
            nobody = dataclasses.replace(ceremony, allowed=ALLOW_NONE)
            return self._options(nobody, ()), State.DONE
        allowed = tuple(c.credential_id for c in event.credentials)
        ceremony = dataclasses.replace(ceremony, allowed=allowed)
        return self._options(ceremony, event.credentials), State.DONE

    def _options(
        self, ceremony: Ceremony, credentials: tuple[PasskeyCredential, ...]
    ) -> list[Effect]:
        options = PasskeyOptions(ceremony=ceremony, user=self.ctx.user, credentials=credentials)
        return [StoreCeremony(ceremony=ceremony), Respond(result=options)]
