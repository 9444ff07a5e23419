"""The drivers' one engine: every effect of the flows carried out over any ``Storage``
(``reference.storage``).

The loop every driver writes (see ``docs/embedding.md``)::

    effects = machine.handle(event)
    for each effect: Fail -> raise, Respond -> return, Handoff -> run the next machine,
                     waits for a reply -> commit what is queued, answer, handle the answer,
                     else -> queue the write

is written once, as generators that yield what they need done (:class:`Call`: a storage
method; :class:`Offload`: slow CPU work such as hashing) and get the result sent back;
``SyncDriver`` (``reference.driver``) performs each step at once, ``AsyncDriver``
(``reference.async_driver``) awaits it. Both keep the transaction rule: write-only
effects (user rows, audit rows, outbox items for mail, texts and webhooks) are queued
and committed together, in one ``begin``/``commit``, right before the next effect that
waits for an answer, and at the end. The single-use spends (a link, an authenticator
step, a recovery code) are a ``take`` or a ``swap`` inside that commit: when another
request won, the commit is rolled back, the sessions this run kept are dropped, and the
flow is refused with ``InvalidArgument``. Cookies the flows set are in ``cookies``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Sequence
from functools import partial
from typing import Any, TypeVar

from bastion.core.auth import totp
from bastion.core.auth.claims import verification_token_claims
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.policy import FlowEnv
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import InvalidArgument, Unauthenticated
from bastion.core.ports import PasswordHasher, Randomness, TokenSigner
from bastion.core.reference.codes import OtpCodes
from bastion.core.reference.storage import UserKey
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

__all__ = ["Call", "Flows", "Offload", "Plan", "RelationCheck", "Step"]

#: answers ``required_relations``: does the user hold every (relation, object)?
RelationCheck = Callable[[str, Sequence[tuple[str, str]]], bool]
T = TypeVar("T")
_TOKEN_KINDS = ("session_token", "access_token", "refresh_token")


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """Call the storage's ``method`` with ``args``; the result is sent back."""

    method: str
    args: tuple[Any, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Offload:
    """Run ``work`` (CPU-bound: a password hash); its result is sent back."""

    work: Callable[[], Any]


Step = Call | Offload
Plan = Generator[Step, Any, T]


@dataclasses.dataclass(frozen=True, slots=True)
class _Rehash:
    """A ``RehashPassword`` whose new hash was computed when it was queued."""

    user_id: str
    password_hash: str


class Flows:
    """The engine both drivers share: what each effect needs done, as :data:`Plan`s."""

    def __init__(
        self,
        env: FlowEnv,
        *,
        hasher: PasswordHasher,
        signer: TokenSigner,
        codes: OtpCodes,
        randomness: Randomness,
        mfa_policy: MfaPolicy | None = None,
        relations: RelationCheck | None = None,
    ) -> None:
        mfa_policy = mfa_policy or MfaPolicy(email_enabled=env.policy.email_enabled)
        if mfa_policy.enable_email_otp and mfa_policy.email_enabled != env.policy.email_enabled:
            raise ValueError(
                "AuthPolicy.email_enabled and MfaPolicy.email_enabled disagree: set both"
                " (with the second off, an emailed-code login is password only)"
            )
        self.env = env
        self.hasher, self.signer, self.codes = hasher, signer, codes
        self.randomness = randomness
        self.mfa_policy = mfa_policy
        self.relations = relations
        self.cookies: dict[str, str | None] = {}
        #: the session family of the run: a login starts one, a refresh keeps the family
        #: of the session it refreshes (reset for every run)
        self.sid: str | None = None

    def plan(self, machine: Machine[Any], event: Event) -> Plan[Result]:
        """Feed ``event`` and carry out the effects until the flow answers or refuses
        (raises the ``BastionError`` its ``Fail`` names)."""
        self.sid = None
        run = _Run(self)
        return run.flow(machine, event)


class _Run:
    """One run: its queue of writes and the sessions it kept."""

    def __init__(self, flows: Flows) -> None:
        self.flows, self.env = flows, flows.env
        self.queued: list[Effect | _Rehash] = []
        #: the sessions this run kept: (user id, nonce)
        self.kept: list[tuple[str, str]] = []

    def flow(self, machine: Machine[Any], event: Event) -> Plan[Result]:
        effects = machine.handle(event)
        while True:
            reply: Event | None = None
            for effect in effects:
                if isinstance(effect, Fail):
                    yield from self.commit()
                    raise effect.exception()
                if isinstance(effect, Respond):
                    yield from self.commit()
                    return effect.result
                if isinstance(effect, Handoff):
                    following = MACHINES[effect.flow](self.env)
                    return (yield from self.flow(following, effect.event))
                if effect.replies:
                    yield from self.commit()
                    reply = yield from self.answer(effect)
                elif isinstance(effect, RehashPassword):
                    new_hash = yield Offload(partial(self.flows.hasher.hash, effect.password))
                    self.queued.append(_Rehash(effect.user_id, new_hash))
                else:
                    self.queued.append(effect)
            if reply is None:
                raise RuntimeError(f"{machine.FLOW} stopped in {machine.state} without an answer")
            effects = machine.handle(reply)

    def commit(self) -> Plan[None]:
        """Apply the queued writes in one transaction. A link or code that another request
        spent first rolls it back, drops the sessions this run kept, and refuses."""
        queued, self.queued = self.queued, []
        if not queued:
            return
        yield from self.atomic(self.writes(queued))

    def atomic(self, plan: Plan[T]) -> Plan[T]:
        """``plan`` inside ``begin``/``commit``; rolled back when it fails."""
        yield Call("begin")
        try:
            result = yield from plan
        except Exception as error:
            yield Call("rollback")
            if isinstance(error, InvalidArgument) and self.kept:
                kept, self.kept = self.kept, []
                yield from self.atomic(self.end_kept(kept))
            raise
        yield Call("commit")
        return result

    def end_kept(self, kept: list[tuple[str, str]]) -> Plan[None]:
        for user_id, nonce in kept:
            yield from self.end_sessions(user_id, only=nonce)

    # -- effects that wait for an answer ----------------------------------------------------

    def answer(self, effect: Effect) -> Plan[Event]:
        flows = self.flows
        match effect:
            case LoadUser(user_id=user_id, email=email, phone_number=phone):
                by: UserKey = "id" if user_id else "email" if email else "phone_number"
                return UserLoaded(user=(yield Call("find_user", (by, user_id or email or phone))))
            case VerifyPasswordHash(password_hash=None, password=password):
                yield Offload(partial(flows.hasher.verify_dummy, password))
                return PasswordVerified(ok=False)
            case VerifyPasswordHash(password_hash=str(stored), password=password):
                ok, rehash = yield Offload(partial(flows.hasher.verify, stored, password))
                return PasswordVerified(ok=ok, needs_rehash=ok and rehash)
            case HashPassword(password=password):
                return PasswordHashed(
                    password_hash=(yield Offload(partial(flows.hasher.hash, password)))
                )
            case CreateUser(user=user):
                created = yield from self.atomic(_one("insert_user", user))
                return UserCreated(user=user) if created else UserAlreadyExists()
            case IssueTokens():
                flows.sid = flows.sid or effect.nonce
                env = self.env
                tokens = mint_tokens(
                    effect, policy=env.policy, signer=flows.signer, now=env.now(), sid=flows.sid
                )
                return TokensIssued(tokens=tokens)
            case CreateVerificationRequest():
                return (yield from self.atomic(self.create_request(effect)))
            case LoadVerificationRequest():
                return (yield from self.load_request(effect))
            case LoadStoredToken(user_id=user_id, nonce=nonce, kind=kind):
                flows.sid = flows.sid or nonce
                token = yield Call("get", ("token", _token_key(user_id, nonce, kind)))
                return StoredTokenLoaded(token=token)
            case CheckRequiredRelations(user_id=user_id, relations=relations):
                check = flows.relations
                allowed = not relations or (check is not None and check(user_id, relations))
                return RelationsChecked(allowed=allowed)
            case DecideSecondFactor(user=user, channel=channel):
                method = flows.mfa_policy.second_factor(user, channel)
                if method is None:
                    return SecondFactorNotRequired()
                return SecondFactorRequired(method=method)
            case GenerateCode():
                return flows.codes.generate(effect)
            case CheckCode():
                return flows.codes.check(effect)
            case LoadChallenge(challenge_id=challenge_id):
                return ChallengeLoaded(challenge=(yield Call("get", ("challenge", challenge_id))))
            case TakeChallenge(challenge_id=challenge_id):
                taken = yield from self.atomic(_one("take", "challenge", challenge_id))
                return ChallengeTaken(ok=taken is not None)
            case CountAttempt(challenge_id=challenge_id, user_id=user_id):
                return (yield from self.atomic(_count(challenge_id, user_id)))
            case LoadAuthenticator(user_id=user_id):
                found = yield Call("get", ("authenticator", user_id))
                return AuthenticatorLoaded(authenticator=found)
            case LoadFactors(user_id=user_id):  # the drivers keep no passkeys
                found = yield Call("get", ("authenticator", user_id))
                verified = bool(found and found.verified)
                return FactorsLoaded(verified_authenticator=verified, passkey=False)
            case EnrolAuthenticator(user_id=user_id):
                secret = totp.new_secret(flows.randomness)
                codes = totp.new_recovery_codes(flows.randomness)
                digests = tuple(totp.recovery_digest(c) for c in codes)
                enrolled = totp.Authenticator(
                    user_id=user_id, secret=secret, recovery_digests=digests
                )
                yield from self.atomic(_one("put", "authenticator", user_id, enrolled))
                return AuthenticatorEnrolled(secret=secret, recovery_codes=codes)
        raise NotImplementedError(f"no answer for {type(effect).__name__}")

    def create_request(self, e: CreateVerificationRequest) -> Plan[Event]:
        claims = verification_token_claims(
            policy=self.env.policy,
            email=e.email,
            identifier=e.identifier.value,
            nonce=e.nonce,
            redirect_uri=e.redirect_uri,
            now=e.issued_at,
        )
        claims["exp"] = e.expires_at
        token = self.flows.signer.sign(claims)
        key = _request_key(e.email, e.identifier.value)
        yield from self.drop_request(key)
        request = VerificationRequest(
            id=self.env.ids.new_id(),
            identifier=e.identifier.value,
            email=e.email,
            nonce=e.nonce,
            redirect_uri=e.redirect_uri,
            expires_at=e.expires_at,
        )
        yield Call("put", ("request", request.id, (request, token)))
        yield Call("put", ("request_token", token, request.id))
        yield Call("put", ("request_for", key, request.id))
        return VerificationRequestCreated(token=token)

    def load_request(self, e: LoadVerificationRequest) -> Plan[Event]:
        if e.token is None:
            key = _request_key(e.email or "", str(e.identifier))
            request_id = yield Call("get", ("request_for", key))
        else:
            request_id = yield Call("get", ("request_token", e.token))
        found = None if request_id is None else (yield Call("get", ("request", request_id)))
        if found is None or e.token is None:
            return VerificationRequestLoaded(request=found and found[0])
        try:
            claims: dict[str, Any] | None = self.flows.signer.verify(e.token)
        except Unauthenticated:
            claims = None
        return VerificationRequestLoaded(request=found[0], claims=claims)

    def drop_request(self, key: str) -> Plan[None]:
        request_id = yield Call("take", ("request_for", key))
        found = None if request_id is None else (yield Call("take", ("request", request_id)))
        if found is not None:
            yield Call("take", ("request_token", found[1]))

    # -- effects that only write: queued until the next commit ------------------------------

    def writes(self, queued: list[Effect | _Rehash]) -> Plan[None]:
        for effect in queued:
            yield from self.write(effect)

    def write(self, effect: Effect | _Rehash) -> Plan[None]:
        cookies = self.flows.cookies
        match effect:
            case UpdateUser(user=user):
                yield Call("save_user", (user,))
            case _Rehash(user_id=user_id, password_hash=new_hash):
                user = yield Call("find_user", ("id", user_id))
                if user is not None:
                    yield Call("save_user", (dataclasses.replace(user, password_hash=new_hash),))
            case AuditRecord() | EmitWebhook() | SendEmail() | SendSms() | RecordMfaOutcome():
                yield Call("emit", (effect,))
            case DeleteVerificationRequest(request_id=request_id):
                found = yield Call("take", ("request", request_id))
                if found is None:
                    raise InvalidArgument("invalid token")  # used by someone else first
                yield Call("take", ("request_token", found[1]))
            case RecordTotpStep(user_id=user_id, step=step):
                found = yield Call("get", ("authenticator", user_id))
                if found is None or (found.last_used_step or -1) >= step:
                    raise InvalidArgument("invalid otp")  # spent by someone else first
                spent = dataclasses.replace(found, last_used_step=step, verified=True)
                yield from _swap_authenticator(found, spent)
            case UseRecoveryCode(user_id=user_id, digest=digest):
                found = yield Call("get", ("authenticator", user_id))
                if found is None or digest not in found.recovery_digests:
                    raise InvalidArgument("invalid otp")  # spent by someone else first
                left = tuple(d for d in found.recovery_digests if d != digest)
                yield from _swap_authenticator(
                    found, dataclasses.replace(found, recovery_digests=left)
                )
            case PersistSession(user_id=user_id, tokens=tokens):
                self.kept.append((user_id, tokens.nonce))
                for kind in _TOKEN_KINDS:
                    if (value := getattr(tokens, kind)) is not None:
                        yield Call("put", ("token", _token_key(user_id, tokens.nonce, kind), value))
                nonces = (yield Call("get", ("sessions", user_id))) or frozenset()
                yield Call("put", ("sessions", user_id, nonces | {tokens.nonce}))
            case DeleteSession(user_id=user_id, nonce=nonce):
                yield from self.end_sessions(user_id, only=nonce)
            case DeleteUserSessions(
                user_id=user_id, keep_nonce=keep, end_links=links, end_credentials=devices
            ):
                yield from self.end_sessions(user_id, keep=keep)
                if devices:
                    yield Call("take", ("authenticator", user_id))
                user = yield Call("find_user", ("id", user_id))
                if links and user is not None and user.email:
                    for identifier in EmailEvent:
                        yield from self.drop_request(_request_key(user.email, identifier.value))
            case StoreChallenge(challenge=challenge):
                yield Call("put", ("challenge", challenge.id, challenge))
            case DropChallenge(challenge_id=challenge_id):
                yield Call("take", ("challenge", challenge_id))
            case SetSessionCookie(value=value):
                cookies["session"] = value
            case ClearSessionCookie():
                cookies["session"] = None
            case SetMfaCookie(value=value):
                cookies["mfa"] = value
            case ClearMfaCookie():
                cookies["mfa"] = None
            case _:
                raise NotImplementedError(f"no write for {type(effect).__name__}")

    def end_sessions(
        self, user_id: str, *, only: str | None = None, keep: str | None = None
    ) -> Plan[None]:
        nonces: frozenset[str] = (yield Call("get", ("sessions", user_id))) or frozenset()
        ending = nonces & {only} if only is not None else nonces - {keep}
        for nonce in ending:
            for kind in _TOKEN_KINDS:
                yield Call("take", ("token", _token_key(user_id, nonce, kind)))
        if ending:
            yield Call("put", ("sessions", user_id, nonces - ending))


def _one(method: str, *args: Any) -> Plan[Any]:
    return (yield Call(method, args))


def _count(challenge_id: str, user_id: str) -> Plan[Event]:
    attempts = yield Call("incr", ("attempts", challenge_id))
    user_attempts = yield Call("incr", ("user_attempts", user_id))
    return AttemptCounted(attempts=attempts, user_attempts=user_attempts)


def _swap_authenticator(found: totp.Authenticator, new: totp.Authenticator) -> Plan[None]:
    if not (yield Call("swap", ("authenticator", found.user_id, found, new))):
        raise InvalidArgument("invalid otp")  # spent by someone else first


def _token_key(user_id: str, nonce: str, kind: str) -> str:
    return f"{user_id}\n{nonce}\n{kind}"


def _request_key(email: str, identifier: str) -> str:
    return f"{email}\n{identifier}"
