"""A synchronous driver that carries out every effect of the flows against a MemoryStore.

It is the loop every driver writes (see ``docs/embedding.md``)::

    effects = machine.handle(event)
    for each effect: Fail -> raise, Respond -> return, Handoff -> run the next machine,
                     waits for a reply -> commit what is queued, answer, handle the answer,
                     else -> queue the write

and it keeps the transaction rule: write-only effects (user rows, audit rows, outbox items
for mail, texts and webhooks) are queued and committed together right before the next
effect that waits for an answer, and at the end; here a commit applies the queue in order.
Cookies the flows set are in :attr:`SyncDriver.cookies`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from bastion.core.auth import totp
from bastion.core.auth.claims import verification_token_claims
from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.policy import FlowEnv
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import InvalidArgument, Unauthenticated
from bastion.core.ports import PasswordHasher, Randomness, TokenSigner
from bastion.core.reference.codes import OtpCodes
from bastion.core.reference.memory import MemoryStore
from bastion.core.reference.tokens import mint_tokens
from bastion.core.state_machines import (
    MACHINES,
    AttemptCounted,
    AuditRecord,
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    CheckRequiredRelations,
    ClearMfaCookie,
    ClearSessionCookie,
    CountAttempt,
    CreateUser,
    CreateVerificationRequest,
    DecideSecondFactor,
    DeleteSession,
    DeleteUserSessions,
    DeleteVerificationRequest,
    DropChallenge,
    Effect,
    EmitWebhook,
    EnrolAuthenticator,
    Event,
    FactorsLoaded,
    Fail,
    GenerateCode,
    Handoff,
    HashPassword,
    IssueTokens,
    LoadAuthenticator,
    LoadChallenge,
    LoadFactors,
    LoadStoredToken,
    LoadUser,
    LoadVerificationRequest,
    Machine,
    PasswordHashed,
    PasswordVerified,
    PersistSession,
    RecordMfaOutcome,
    RecordTotpStep,
    RehashPassword,
    RelationsChecked,
    Respond,
    SecondFactorNotRequired,
    SecondFactorRequired,
    SendEmail,
    SendSms,
    SetMfaCookie,
    SetSessionCookie,
    StoreChallenge,
    StoredTokenLoaded,
    TakeChallenge,
    TokensIssued,
    UpdateUser,
    UserAlreadyExists,
    UserCreated,
    UseRecoveryCode,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
    VerifyPasswordHash,
)
from bastion.core.state_machines.effects import Result

__all__ = ["HANDLED", "RelationCheck", "SyncDriver"]

#: answers ``required_relations``: does the user hold every (relation, object)?
RelationCheck = Callable[[str, Sequence[tuple[str, str]]], bool]


class SyncDriver:
    """Runs flows to their answer. One driver may serve many requests; ``cookies`` holds
    what the last one set (``None``: cleared)."""

    def __init__(
        self,
        env: FlowEnv,
        store: MemoryStore,
        *,
        hasher: PasswordHasher,
        signer: TokenSigner,
        codes: OtpCodes,
        randomness: Randomness,
        mfa_policy: MfaPolicy | None = None,
        relations: RelationCheck | None = None,
    ) -> None:
        self.env, self.store = env, store
        self.hasher, self.signer, self.codes = hasher, signer, codes
        self.randomness = randomness
        self.mfa_policy = mfa_policy or MfaPolicy()
        self.relations = relations
        self.cookies: dict[str, str | None] = {}
        #: the session family of the request being run: a login starts one, a refresh
        #: keeps the family of the session it refreshes (reset for every request)
        self.sid: str | None = None
        self._queued: list[Callable[[], None]] = []
        #: the sessions the current request kept: (user id, nonce)
        self._kept: list[tuple[str, str]] = []

    def run(self, machine: Machine[Any], event: Event) -> Result:
        """Feed ``event`` and carry out the effects until the flow answers or refuses
        (raises the ``BastionError`` its ``Fail`` names)."""
        self._kept = []
        self.sid = None
        try:
            return self._run(machine, event)
        finally:
            self._kept = []

    def _run(self, machine: Machine[Any], event: Event) -> Result:
        effects = machine.handle(event)
        while True:
            reply: Event | None = None
            for effect in effects:
                if isinstance(effect, Fail):
                    self.commit()
                    raise effect.exception()
                if isinstance(effect, Respond):
                    self.commit()
                    return effect.result
                if isinstance(effect, Handoff):
                    return self._run(MACHINES[effect.flow](self.env), effect.event)
                if effect.replies:
                    self.commit()
                    reply = self.answer(effect)
                else:
                    self.queue(effect)
            if reply is None:
                raise RuntimeError(f"{machine.FLOW} stopped in {machine.state} without an answer")
            effects = machine.handle(reply)

    def queue(self, effect: Effect) -> None:
        """Hold a write-only effect until the next commit."""
        self._queued.append(self.write(effect))

    def commit(self) -> None:
        """Apply the queued writes together (a real store: one transaction). A link or code
        that another request spent first stops the commit: the sessions this request kept
        for it never reach the caller. This store cannot roll back: writes queued before the
        failing one stay (the MFA flow queues its spend first)."""
        queued, self._queued = self._queued, []
        try:
            for write in queued:
                write()
        except InvalidArgument:
            for user_id, nonce in self._kept:
                _end_one(self.store, user_id, nonce)
            raise

    # -- effects that wait for an answer ----------------------------------------------------

    def answer(self, effect: Effect) -> Event:
        handler = _ANSWERS.get(type(effect))
        if handler is None:
            raise NotImplementedError(f"no answer for {type(effect).__name__}")
        return handler(self, effect)

    def _load_user(self, e: LoadUser) -> Event:
        if e.user_id is not None:
            return UserLoaded(user=self.store.user_by(user_id=e.user_id))
        if e.email is not None:
            return UserLoaded(user=self.store.user_by(email=e.email))
        return UserLoaded(user=self.store.user_by(phone_number=e.phone_number))

    def _verify_password(self, e: VerifyPasswordHash) -> Event:
        if e.password_hash is None:
            self.hasher.verify_dummy(e.password)
            return PasswordVerified(ok=False)
        ok, rehash = self.hasher.verify(e.password_hash, e.password)
        return PasswordVerified(ok=ok, needs_rehash=ok and rehash)

    def _hash_password(self, e: HashPassword) -> Event:
        return PasswordHashed(password_hash=self.hasher.hash(e.password))

    def _create_user(self, e: CreateUser) -> Event:
        return UserCreated(user=e.user) if self.store.insert_user(e.user) else UserAlreadyExists()

    def _issue_tokens(self, e: IssueTokens) -> Event:
        self.sid = self.sid or e.nonce
        now, policy = self.env.now(), self.env.policy
        tokens = mint_tokens(e, policy=policy, signer=self.signer, now=now, sid=self.sid)
        return TokensIssued(tokens=tokens)

    def _create_request(self, e: CreateVerificationRequest) -> Event:
        claims = verification_token_claims(
            policy=self.env.policy,
            email=e.email,
            identifier=e.identifier.value,
            nonce=e.nonce,
            redirect_uri=e.redirect_uri,
            now=e.issued_at,
        )
        claims["exp"] = e.expires_at
        token = self.signer.sign(claims)
        old = self.store.request_by_email(e.email, e.identifier.value)
        if old is not None:
            del self.store.requests[old.id]
        request = VerificationRequest(
            id=self.env.ids.new_id(),
            identifier=e.identifier.value,
            email=e.email,
            nonce=e.nonce,
            redirect_uri=e.redirect_uri,
            expires_at=e.expires_at,
        )
        self.store.requests[request.id] = (request, token)
        return VerificationRequestCreated(token=token)

    def _load_request(self, e: LoadVerificationRequest) -> Event:
        if e.token is None:
            found = self.store.request_by_email(e.email or "", str(e.identifier))
            return VerificationRequestLoaded(request=found)
        found = self.store.request_by_token(e.token)
        if found is None:
            return VerificationRequestLoaded(request=None)
        try:
            claims: dict[str, Any] | None = self.signer.verify(e.token)
        except Unauthenticated:
            claims = None
        return VerificationRequestLoaded(request=found, claims=claims)

    def _stored_token(self, e: LoadStoredToken) -> Event:
        self.sid = self.sid or e.nonce
        return StoredTokenLoaded(token=self.store.sessions.get((e.user_id, e.nonce, e.kind)))

    def _relations(self, e: CheckRequiredRelations) -> Event:
        if not e.relations:
            return RelationsChecked(allowed=True)
        check = self.relations
        return RelationsChecked(allowed=check is not None and check(e.user_id, e.relations))

    def _second_factor(self, e: DecideSecondFactor) -> Event:
        method = self.mfa_policy.second_factor(e.user, e.channel)
        return SecondFactorNotRequired() if method is None else SecondFactorRequired(method=method)

    def _load_challenge(self, e: LoadChallenge) -> Event:
        return ChallengeLoaded(challenge=self.store.challenges.get(e.challenge_id))

    def _take_challenge(self, e: TakeChallenge) -> Event:
        return ChallengeTaken(ok=self.store.challenges.pop(e.challenge_id, None) is not None)

    def _count_attempt(self, e: CountAttempt) -> Event:
        store = self.store
        store.attempts[e.challenge_id] = store.attempts.get(e.challenge_id, 0) + 1
        store.user_attempts[e.user_id] = store.user_attempts.get(e.user_id, 0) + 1
        return AttemptCounted(
            attempts=store.attempts[e.challenge_id], user_attempts=store.user_attempts[e.user_id]
        )

    def _load_authenticator(self, e: LoadAuthenticator) -> Event:
        return AuthenticatorLoaded(authenticator=self.store.authenticators.get(e.user_id))

    def _factors(self, e: LoadFactors) -> Event:
        """This store keeps no passkeys: only the authenticator counts."""
        found = self.store.authenticators.get(e.user_id)
        return FactorsLoaded(verified_authenticator=bool(found and found.verified), passkey=False)

    def _enrol(self, e: EnrolAuthenticator) -> Event:
        secret = totp.new_secret(self.randomness)
        codes = totp.new_recovery_codes(self.randomness)
        digests = tuple(totp.recovery_digest(c) for c in codes)
        self.store.authenticators[e.user_id] = totp.Authenticator(
            user_id=e.user_id, secret=secret, recovery_digests=digests
        )
        return AuthenticatorEnrolled(secret=secret, recovery_codes=codes)

    # -- effects that only write: queued until the next commit ------------------------------

    def write(self, effect: Effect) -> Callable[[], None]:
        store, outbox = self.store, self.store.outbox
        match effect:
            case UpdateUser(user=user):
                return lambda: store.users.__setitem__(user.id, user)
            case RehashPassword(user_id=user_id, password=password):
                new_hash = self.hasher.hash(password)
                return lambda: _set_hash(store, user_id, new_hash)
            case AuditRecord():
                return lambda: outbox.audit.append(effect)
            case EmitWebhook():
                return lambda: outbox.webhooks.append(effect)
            case SendEmail():
                return lambda: outbox.mails.append(effect)
            case SendSms():
                return lambda: outbox.texts.append(effect)
            case RecordMfaOutcome(outcome=outcome):
                return lambda: outbox.mfa_outcomes.append(outcome)
            case DeleteVerificationRequest(request_id=request_id):
                return lambda: _consume(store, request_id)
            case RecordTotpStep(user_id=user_id, step=step):
                return lambda: _record_step(store, user_id, step)
            case UseRecoveryCode(user_id=user_id, digest=digest):
                return lambda: _use_recovery_code(store, user_id, digest)
            case PersistSession(user_id=user_id, tokens=tokens):
                self._kept.append((user_id, tokens.nonce))
                return lambda: _persist(store, user_id, tokens)
            case DeleteSession(user_id=user_id, nonce=nonce):
                return lambda: _end_one(store, user_id, nonce)
            case DeleteUserSessions(
                user_id=user_id, keep_nonce=keep, end_links=links, end_credentials=devices
            ):
                return lambda: _end_all(store, user_id, keep, links, devices)
            case StoreChallenge(challenge=challenge):
                return lambda: store.challenges.__setitem__(challenge.id, challenge)
            case DropChallenge(challenge_id=challenge_id):
                return lambda: _drop(store, challenge_id)
            case SetSessionCookie(value=value):
                return lambda: self.cookies.__setitem__("session", value)
            case ClearSessionCookie():
                return lambda: self.cookies.__setitem__("session", None)
            case SetMfaCookie(value=value):
                return lambda: self.cookies.__setitem__("mfa", value)
            case ClearMfaCookie():
                return lambda: self.cookies.__setitem__("mfa", None)
        raise NotImplementedError(f"no write for {type(effect).__name__}")


def _set_hash(store: MemoryStore, user_id: str, password_hash: str) -> None:
    user = store.users.get(user_id)
    if user is not None:
        store.users[user_id] = dataclasses.replace(user, password_hash=password_hash)


def _drop(store: MemoryStore, challenge_id: str) -> None:
    store.challenges.pop(challenge_id, None)


def _consume(store: MemoryStore, request_id: str) -> None:
    if store.requests.pop(request_id, None) is None:
        raise InvalidArgument("invalid token")  # used by someone else first


def _record_step(store: MemoryStore, user_id: str, step: int) -> None:
    found = store.authenticators.get(user_id)
    if found is None or (found.last_used_step is not None and step <= found.last_used_step):
        raise InvalidArgument("invalid otp")  # spent by someone else first
    store.authenticators[user_id] = dataclasses.replace(found, last_used_step=step, verified=True)


def _use_recovery_code(store: MemoryStore, user_id: str, digest: str) -> None:
    found = store.authenticators.get(user_id)
    if found is None or digest not in found.recovery_digests:
        raise InvalidArgument("invalid otp")  # spent by someone else first
    left = tuple(d for d in found.recovery_digests if d != digest)
    store.authenticators[user_id] = dataclasses.replace(found, recovery_digests=left)


def _persist(store: MemoryStore, user_id: str, tokens: Any) -> None:
    for kind in ("session_token", "access_token", "refresh_token"):
        value = getattr(tokens, kind)
        if value is not None:
            store.sessions[(user_id, tokens.nonce, kind)] = value


def _end_one(store: MemoryStore, user_id: str, nonce: str) -> None:
    for key in [k for k in store.sessions if k[:2] == (user_id, nonce)]:
        del store.sessions[key]


def _end_all(
    store: MemoryStore, user_id: str, keep: str | None, links: bool, devices: bool
) -> None:
    store.end_sessions(user_id, keep_nonce=keep)
    if devices:
        store.authenticators.pop(user_id, None)
    user = store.users.get(user_id)
    if links and user is not None and user.email:
        store.drop_requests_for(user.email)


_ANSWERS: dict[type[Effect], Callable[[SyncDriver, Any], Event]] = {
    LoadUser: SyncDriver._load_user,
    VerifyPasswordHash: SyncDriver._verify_password,
    HashPassword: SyncDriver._hash_password,
    CreateUser: SyncDriver._create_user,
    IssueTokens: SyncDriver._issue_tokens,
    CreateVerificationRequest: SyncDriver._create_request,
    LoadVerificationRequest: SyncDriver._load_request,
    LoadStoredToken: SyncDriver._stored_token,
    CheckRequiredRelations: SyncDriver._relations,
    DecideSecondFactor: SyncDriver._second_factor,
    GenerateCode: lambda driver, e: driver.codes.generate(e),
    CheckCode: lambda driver, e: driver.codes.check(e),
    LoadChallenge: SyncDriver._load_challenge,
    TakeChallenge: SyncDriver._take_challenge,
    CountAttempt: SyncDriver._count_attempt,
    LoadAuthenticator: SyncDriver._load_authenticator,
    LoadFactors: SyncDriver._factors,
    EnrolAuthenticator: SyncDriver._enrol,
}

_WRITES: frozenset[type[Effect]] = frozenset(
    {
        UpdateUser,
        RehashPassword,
        AuditRecord,
        EmitWebhook,
        SendEmail,
        SendSms,
        RecordMfaOutcome,
        DeleteVerificationRequest,
        RecordTotpStep,
        UseRecoveryCode,
        PersistSession,
        DeleteSession,
        DeleteUserSessions,
        StoreChallenge,
        DropChallenge,
        SetSessionCookie,
        ClearSessionCookie,
        SetMfaCookie,
        ClearMfaCookie,
    }
)
#: every effect type the driver carries out (besides ``Fail``, ``Respond`` and handoffs):
#: all that the machines of ``MACHINES`` emit
HANDLED: frozenset[type[Effect]] = frozenset(_ANSWERS) | _WRITES
