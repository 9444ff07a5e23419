"""Passkeys (WebAuthn), second half: the answer to an issued challenge is verified, then
a credential is stored (registration) or a session started (sign-in, alone or as the
second factor). The first half, issuing the challenge, is
:mod:`core.state_machines.passkey_options`.

Rules / theory of operation
---------------------------
1. The ceremony named by the response's challenge is TAKEN first: absent, expired, used,
   of the other kind, or for another caller is "invalid passkey challenge"
   (InvalidArgument for a registration, Unauthenticated for a sign-in); a replayed
   response therefore never verifies twice.
2. Signature, origin (``--url``, ``--allowed-origins``) and rp id hash are checked by the
   library (``VerifyAttestation`` / ``VerifyAssertion``); any failure is "invalid passkey".
3. Sign-in then checks: the credential is one the ceremony allows; the counter increased
   (or both are 0); the backup-eligible flag never changes; user verification when the
   ceremony required it. The new counter and backup state are stored by compare-and-set:
   of two sign-ins with one counter value, one wins.
4. Registration stores the credential; its id is unique across all users
   (AlreadyExists). Audit ``user.passkey_registered``, webhook of that name.
5. A second factor takes the MFA challenge atomically (so a code and a passkey cannot
   both finish it), clears the cookie, audits ``user.mfa_passed`` with method
   ``webauthn``. Every sign-in audits ``user.login_success`` and sends ``user.login``;
   every refused response audits ``user.passkey_failed`` with the reason.
"""

from __future__ import annotations

import dataclasses
import enum

from bastion.core.auth.claims import DEFAULT_SCOPE
from bastion.core.auth.mfa import Challenge, Method
from bastion.core.auth.passkeys import (
    Ceremony,
    CeremonyKind,
    PasskeyCredential,
    counter_moved_back,
)
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.roles import login_roles
from bastion.core.auth.user import User
from bastion.core.errors import (
    AlreadyExists,
    InvalidArgument,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    EmitWebhook,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
    SetSessionCookie,
    WebhookEvent,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.mfa_effects import (
    ChallengeLoaded,
    ChallengeTaken,
    ClearMfaCookie,
    LoadChallenge,
    MfaOutcome,
    RecordMfaOutcome,
    TakeChallenge,
)
from bastion.core.state_machines.passkey_effects import (
    AssertionVerified,
    AttestationVerified,
    CeremonyTaken,
    CredentialLoaded,
    CredentialStored,
    CredentialUseRecorded,
    LoadCredential,
    RecordCredentialUse,
    StoreCredential,
    TakeCeremony,
    VerifyAssertion,
    VerifyAttestation,
)
from bastion.core.state_machines.passkey_options import INVALID_SESSION, live_login
from bastion.core.state_machines.session_start import issue_tokens, keep_session

__all__ = [
    "LOGIN_METHOD",
    "PasskeyMachine",
    "RegistrationVerifyRequested",
    "SignInVerifyRequested",
    "State",
]

#: ``login_method`` of a passwordless passkey session (``auth_recipe`` of its webhook)
LOGIN_METHOD = "webauthn"
INVALID_CHALLENGE = "invalid passkey challenge"
INVALID_PASSKEY = "invalid passkey"
ALREADY_REGISTERED = "this passkey is registered already"
REGISTERED = "Passkey registered successfully"
LOGGED_IN = "Logged in successfully"


class State(enum.Enum):
    START = "start"
    #: verify: waiting for the single-use take of the ceremony
    TAKING_CEREMONY = "taking_ceremony"
    #: registration: waiting for the library's verdict
    VERIFYING_ATTESTATION = "verifying_attestation"
    #: registration: waiting for the unique insert
    STORING_CREDENTIAL = "storing_credential"
    #: registration: waiting for the user (the answer carries them)
    LOADING_OWNER = "loading_owner"
    #: sign-in: waiting for the stored credential
    LOADING_CREDENTIAL = "loading_credential"
    #: sign-in: waiting for the library's verdict
    VERIFYING_ASSERTION = "verifying_assertion"
    #: sign-in: waiting for the counter's compare-and-set
    RECORDING_USE = "recording_use"
    #: second factor: waiting for the pending MFA challenge (roles, scope, expiry)
    LOADING_MFA_CHALLENGE = "loading_mfa_challenge"
    #: second factor: waiting for the atomic take of the MFA challenge
    TAKING_MFA_CHALLENGE = "taking_mfa_challenge"
    #: sign-in: waiting for the credential's owner
    LOADING_SIGNER = "loading_signer"
    #: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationVerifyRequested(Event):
    user_id: str
    #: the challenge the response answers (from its ``clientDataJSON``)
    challenge: str
    response: str = dataclasses.field(repr=False)
    name: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SignInVerifyRequested(Event):
    challenge: str
    #: the credential id the response names (base64url)
    credential_id: str
    response: str = dataclasses.field(repr=False)
    mfa_challenge_id: str | None = None
    #: OAuth authorize ``state`` to bind a passwordless sign-in to, if any
    state: str | None = None


TABLE: Table[State] = {
    # registration
    (State.START, RegistrationVerifyRequested): edge(
        "_on_registration_verify", State.TAKING_CEREMONY
    ),
    (State.TAKING_CEREMONY, CeremonyTaken): edge(
        "_on_ceremony",
        State.VERIFYING_ATTESTATION,
        State.LOADING_CREDENTIAL,
        State.FAILED,
    ),
    (State.VERIFYING_ATTESTATION, AttestationVerified): edge(
        "_on_attestation", State.STORING_CREDENTIAL, State.FAILED
    ),
    (State.STORING_CREDENTIAL, CredentialStored): edge(
        "_on_stored", State.LOADING_OWNER, State.FAILED
    ),
    (State.LOADING_OWNER, UserLoaded): edge("_on_owner", State.DONE, State.FAILED),
    # sign-in
    (State.START, SignInVerifyRequested): edge("_on_sign_in_verify", State.TAKING_CEREMONY),
    (State.LOADING_CREDENTIAL, CredentialLoaded): edge(
        "_on_credential", State.VERIFYING_ASSERTION, State.FAILED
    ),
    (State.VERIFYING_ASSERTION, AssertionVerified): edge(
        "_on_assertion", State.RECORDING_USE, State.FAILED
    ),
    (State.RECORDING_USE, CredentialUseRecorded): edge(
        "_on_use_recorded", State.LOADING_MFA_CHALLENGE, State.LOADING_SIGNER, State.FAILED
    ),
    (State.LOADING_MFA_CHALLENGE, ChallengeLoaded): edge(
        "_on_verify_mfa_challenge", State.TAKING_MFA_CHALLENGE, State.FAILED
    ),
    (State.TAKING_MFA_CHALLENGE, ChallengeTaken): edge(
        "_on_mfa_taken", State.LOADING_SIGNER, State.FAILED
    ),
    (State.LOADING_SIGNER, UserLoaded): edge("_on_signer", State.ISSUING_TOKENS, State.FAILED),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class PasskeyContext:
    ceremony: Ceremony | None = None
    user: User | None = None
    #: the caller (registration) or the MFA cookie (sign-in) the verify came with
    caller_id: str = ""
    credential: PasskeyCredential | None = None
    mfa_challenge: Challenge | None = None
    response: str = ""
    name: str = ""
    oauth_state: str | None = None
    #: the verify is a registration's
    registering: bool = False
    #: sign-in: the credential id the response names
    credential_id: str = ""


class PasskeyMachine(Machine[State]):
    FLOW = "passkey"
    STATES = State
    TABLE = TABLE
    CONTEXT = PasskeyContext
    EMITS = frozenset(
        {
            AuditRecord,
            ClearMfaCookie,
            EmitWebhook,
            Fail,
            IssueTokens,
            LoadChallenge,
            LoadCredential,
            LoadUser,
            PersistSession,
            RecordCredentialUse,
            RecordMfaOutcome,
            Respond,
            SetSessionCookie,
            StoreCredential,
            TakeCeremony,
            TakeChallenge,
            VerifyAssertion,
            VerifyAttestation,
        }
    )
    ctx: PasskeyContext

    # -- verify: the ceremony ---------------------------------------------------------------

    def _on_registration_verify(
        self, event: RegistrationVerifyRequested
    ) -> tuple[list[Effect], State]:
        self.ctx.caller_id, self.ctx.response, self.ctx.name = (
            event.user_id,
            event.response,
            event.name,
        )
        self.ctx.registering = True
        return [TakeCeremony(challenge=event.challenge)], State.TAKING_CEREMONY

    def _on_sign_in_verify(self, event: SignInVerifyRequested) -> tuple[list[Effect], State]:
        self.ctx.caller_id = event.mfa_challenge_id or ""
        self.ctx.response = event.response
        self.ctx.oauth_state = event.state
        self.ctx.credential_id = event.credential_id
        return [TakeCeremony(challenge=event.challenge)], State.TAKING_CEREMONY

    def _on_ceremony(self, event: CeremonyTaken) -> tuple[list[Effect], State]:
        ceremony, now = event.ceremony, self._env.now()
        if ceremony is None or ceremony.expires_at < now:
            return self._refused(INVALID_CHALLENGE, registration=self.ctx.registering)
        self.ctx.ceremony = ceremony
        if self.ctx.registering:
            if ceremony.kind is not CeremonyKind.REGISTER or ceremony.user_id != self.ctx.caller_id:
                return self._refused(INVALID_CHALLENGE, registration=True)
            verify = VerifyAttestation(
                ceremony=ceremony, response=self.ctx.response, name=self.ctx.name
            )
            return [verify], State.VERIFYING_ATTESTATION
        if ceremony.kind is CeremonyKind.REGISTER:
            return self._refused(INVALID_CHALLENGE)
        if ceremony.mfa_challenge_id != self.ctx.caller_id:
            return self._refused(INVALID_CHALLENGE)
        if ceremony.allowed and self.ctx.credential_id not in ceremony.allowed:
            return self._refused(INVALID_PASSKEY)
        return [LoadCredential(credential_id=self.ctx.credential_id)], State.LOADING_CREDENTIAL

    # -- verify: registration ---------------------------------------------------------------

    def _on_attestation(self, event: AttestationVerified) -> tuple[list[Effect], State]:
        if event.credential is None:
            return self._refused(INVALID_PASSKEY, registration=True, reason=event.reason)
        if self._require(self.ctx.ceremony).user_verification and not event.user_verified:
            reason = "user verification missing"
            return self._refused(INVALID_PASSKEY, registration=True, reason=reason)
        self.ctx.credential = event.credential
        return [StoreCredential(credential=event.credential)], State.STORING_CREDENTIAL

    def _on_stored(self, event: CredentialStored) -> tuple[list[Effect], State]:
        if not event.ok:
            return self._fail(AlreadyExists, ALREADY_REGISTERED)
        return [LoadUser(user_id=self.ctx.caller_id)], State.LOADING_OWNER

    def _on_owner(self, event: UserLoaded) -> tuple[list[Effect], State]:
        credential, user = self._require(self.ctx.credential), event.user
        if user is None:
            return self._fail(Unauthenticated, "unauthorized")
        metadata = {"credential": credential.id, "name": credential.name}
        return [
            AuditRecord(
                action=AuditAction.PASSKEY_REGISTERED,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata=metadata,
            ),
            EmitWebhook(event=WebhookEvent.PASSKEY_REGISTERED, user=user, auth_recipe=LOGIN_METHOD),
            Respond(result=AuthResponse(message=REGISTERED, user=user)),
        ], State.DONE

    # -- verify: sign-in --------------------------------------------------------------------

    def _on_credential(self, event: CredentialLoaded) -> tuple[list[Effect], State]:
        ceremony, credential = self._require(self.ctx.ceremony), event.credential
        if credential is None:
            return self._refused(INVALID_PASSKEY)
        if ceremony.user_id and credential.user_id != ceremony.user_id:
            return self._refused(INVALID_PASSKEY)
        self.ctx.credential = credential
        verify = VerifyAssertion(
            ceremony=ceremony, credential=credential, response=self.ctx.response
        )
        return [verify], State.VERIFYING_ASSERTION

    def _on_assertion(self, event: AssertionVerified) -> tuple[list[Effect], State]:
        ceremony, credential = self._require(self.ctx.ceremony), self._require(self.ctx.credential)
        if not event.ok:
            return self._refused(INVALID_PASSKEY, reason=event.reason)
        if counter_moved_back(credential.sign_count, event.sign_count):
            return self._refused(INVALID_PASSKEY, reason="sign counter did not increase")
        if event.backup_eligible != credential.backup_eligible:
            return self._refused(INVALID_PASSKEY, reason="backup eligibility changed")
        if ceremony.user_verification and not event.user_verified:
            return self._refused(INVALID_PASSKEY, reason="user verification missing")
        record = RecordCredentialUse(
            credential=credential,
            previous=credential.sign_count,
            sign_count=event.sign_count,
            backed_up=event.backed_up,
            at=int(self._env.now()),
        )
        return [record], State.RECORDING_USE

    def _on_use_recorded(self, event: CredentialUseRecorded) -> tuple[list[Effect], State]:
        ceremony, credential = self._require(self.ctx.ceremony), self._require(self.ctx.credential)
        if not event.ok:
            return self._refused(INVALID_PASSKEY, reason="sign counter raced")
        if ceremony.kind is CeremonyKind.SECOND_FACTOR:
            load = LoadChallenge(challenge_id=ceremony.mfa_challenge_id)
            return [load], State.LOADING_MFA_CHALLENGE
        return [LoadUser(user_id=credential.user_id)], State.LOADING_SIGNER

    def _on_verify_mfa_challenge(self, event: ChallengeLoaded) -> tuple[list[Effect], State]:
        credential = self._require(self.ctx.credential)
        challenge = event.challenge
        if challenge is None or not live_login(challenge, self.ctx.caller_id, self._env.now()):
            return self._fail(Unauthenticated, INVALID_SESSION)
        self.ctx.mfa_challenge = challenge
        if challenge.user_id != credential.user_id:
            return self._fail(Unauthenticated, INVALID_SESSION)
        take = TakeChallenge(challenge_id=challenge.id)  # no code was counted
        return [take], State.TAKING_MFA_CHALLENGE

    def _on_mfa_taken(self, event: ChallengeTaken) -> tuple[list[Effect], State]:
        if not event.ok:
            return self._fail(Unauthenticated, INVALID_SESSION)
        credential = self._require(self.ctx.credential)
        return [LoadUser(user_id=credential.user_id)], State.LOADING_SIGNER

    def _on_signer(self, event: UserLoaded) -> tuple[list[Effect], State]:
        ceremony, user = self._require(self.ctx.ceremony), event.user
        if user is None or user.is_revoked:
            return self._fail(Unauthenticated, INVALID_PASSKEY)
        self.ctx.user = user
        mfa = self.ctx.mfa_challenge
        if ceremony.kind is CeremonyKind.SECOND_FACTOR and mfa is not None:
            roles, scope = mfa.roles, mfa.scope
            login_method, state = mfa.login_method, mfa.oauth_state
        else:
            found = login_roles((), user.roles, self.policy)
            if found is None:
                return self._fail(Unauthenticated, INVALID_PASSKEY)
            roles, scope = found, DEFAULT_SCOPE
            login_method, state = LOGIN_METHOD, self.ctx.oauth_state
        issue = issue_tokens(
            self._env.ids,
            user=user,
            roles=roles,
            scope=scope,
            login_method=login_method,
            state=state,
        )
        return [issue], State.ISSUING_TOKENS

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        ceremony, user = self._require(self.ctx.ceremony), self._require(self.ctx.user)
        credential = self._require(self.ctx.credential)
        mfa = self.ctx.mfa_challenge
        second = ceremony.kind is CeremonyKind.SECOND_FACTOR and mfa is not None
        login_method = mfa.login_method if second and mfa else LOGIN_METHOD
        recipe = mfa.auth_recipe if second and mfa else LOGIN_METHOD
        metadata = {"method": Method.WEBAUTHN.value, "credential": credential.id}
        effects: list[Effect] = [*keep_session(user, login_method, event.tokens)]
        if second:
            effects += [
                ClearMfaCookie(),
                AuditRecord(
                    action=AuditAction.MFA_PASSED,
                    actor_id=user.id,
                    actor_email=user.email,
                    resource_id=user.id,
                    metadata=metadata,
                ),
                RecordMfaOutcome(
                    user_id=user.id, method=Method.WEBAUTHN, outcome=MfaOutcome.PASSED
                ),
            ]
        effects += [
            EmitWebhook(event=WebhookEvent.LOGIN, user=user, auth_recipe=recipe),
            AuditRecord(
                action=AuditAction.LOGIN_SUCCESS,
                actor_id=user.id,
                actor_email=user.email,
                resource_id=user.id,
                metadata=metadata,
            ),
            Respond(result=AuthResponse.with_tokens(LOGGED_IN, user, event.tokens)),
        ]
        return effects, State.DONE

    # -- helpers ----------------------------------------------------------------------------

    def _refused(
        self, message: str, *, registration: bool = False, reason: str = ""
    ) -> tuple[list[Effect], State]:
        """A response that proves nothing: audited, then refused."""
        ceremony, credential = self.ctx.ceremony, self.ctx.credential
        user_id = (credential.user_id if credential else "") or (
            ceremony.user_id if ceremony else ""
        )
        effects, state = self._fail(InvalidArgument if registration else Unauthenticated, message)
        audit = AuditRecord(
            action=AuditAction.PASSKEY_FAILED,
            actor_id=user_id,
            resource_id=user_id,
            metadata={"reason": reason or message},
        )
        return [audit, *effects], state
