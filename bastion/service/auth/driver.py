"""The flow driver: carries out the effects a ``core.state_machines`` machine asks for.

One :class:`FlowRun` per request. ``run(machine, event)`` feeds the event, executes the
effects in order and answers the last one of a batch when it waits for a reply, until the
machine responds (``Respond`` -> the result) or refuses (``Fail`` -> the error is raised).

Transactions: effects that write SQL and need no answer (``UpdateUser``, audit rows,
outbox items for mail and webhooks, consuming a verification request, the session marker)
are collected and committed together in ONE transaction, right before the next effect
that reads, waits or touches the memory store. So a user change and the mail and webhook
it causes commit together or not at all, and SQL always commits before sessions are
dropped (architecture.md, "State that spans stores"). ``CreateUser`` commits what is queued
before it in its own transaction, with the new row (its webhooks and audit row), or drops
it when the identity is taken. A flow that keeps a session before its commit (issue 27:
the durable commit comes last) and then finds its link, authenticator code or recovery
code already spent (a compare-and-set in that commit) rolls the commit back and drops
that session.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from bastion.core.auth import otp
from bastion.core.errors import Internal, InvalidArgument, PermissionDenied, Unauthenticated
from bastion.core.state_machines import MACHINES, Handoff, Machine
from bastion.core.state_machines._machine import Effect, Event, Fail
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CheckRequiredRelations,
    ClearSessionCookie,
    CreateUser,
    CreateVerificationRequest,
    DeleteSession,
    DeleteUserSessions,
    DeleteVerificationRequest,
    EmitWebhook,
    HashPassword,
    IssueTokens,
    LoadStoredToken,
    LoadUser,
    LoadVerificationRequest,
    PersistSession,
    RehashPassword,
    Respond,
    Result,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    VerifyPasswordHash,
)
from bastion.core.state_machines.events import (
    PasswordHashed,
    PasswordVerified,
    RelationsChecked,
    StoredTokenLoaded,
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
    VerificationRequestCreated,
)
from bastion.core.state_machines.login import (
    DecideSecondFactor,
    SecondFactorNotRequired,
    SecondFactorRequired,
)
from bastion.core.state_machines.mfa_effects import (
    ClearMfaCookie,
    MfaOutcome,
    RecordMfaOutcome,
    RecordTotpStep,
    SendSms,
    SetMfaCookie,
    UseRecoveryCode,
)
from bastion.core.state_machines.session import INVALID_REFRESH_TOKEN
from bastion.service.auth.authenticators import AUTHENTICATOR_EFFECTS
from bastion.service.auth.flow_sql import (
    Consumed,
    OneInsert,
    SqlOp,
    audit_entry,
    consume_request,
    drop_credentials,
    drop_pending_links,
    enqueue_item,
    load_user,
    record_entry,
    record_totp_step,
    use_recovery_code,
)
from bastion.service.auth.mail import compose_mail
from bastion.service.auth.mfa_outcomes import MFA_WEBHOOK_EVENTS, outcome_webhook
from bastion.service.auth.mfa_selfservice import mark_fresh_factor
from bastion.service.auth.sessions import REFRESH, REFRESH_GRACE_SECONDS
from bastion.service.auth.verification_requests import create_request, load_request
from bastion.service.context import CallerContext, Cookie
from bastion.service.mfa_challenges import CHALLENGE_EFFECTS
from bastion.storage import StorageUnavailable
from bastion.storage import passkeys as passkey_rows
from bastion.storage import users as user_rows

if TYPE_CHECKING:
    from bastion.core.auth.policy import FlowEnv
    from bastion.service.auth.parts import AuthParts

__all__ = ["FlowRun"]

log = logging.getLogger("bastion.auth")


class FlowRun:
    def __init__(
        self,
        auth: AuthParts,
        caller: CallerContext,
        *,
        sid: str | None = None,
        refresh: bool = False,
        env: FlowEnv | None = None,
    ) -> None:
        self.auth = auth
        self.caller = caller
        #: what the flows of this run decide with (a queued flow: its requester's)
        self.env = env or auth.env
        #: the session family of the session being rotated, refreshed or ended
        self.sid = sid
        #: a refresh-token rotation: replaced tokens are remembered (grace window, replay)
        self.refresh = refresh
        self.cookies: list[Cookie] = []
        #: what ``CreateUser`` found taken: "email" / "phone_number"
        self.taken: str | None = None
        #: the account the run loaded or created last (the account cookies name it)
        self.user_id: str | None = None
        self._sql: list[SqlOp] = []
        self._consumed_message = "invalid token"
        #: the sessions this run kept: (user id, sid, nonce)
        self._kept: list[tuple[str, str, str]] = []
        #: MFA outcomes queued with the SQL above: counted once it commits
        self._outcomes: list[RecordMfaOutcome] = []
        #: when each session this run minted was issued (its tokens' ``iat``), by nonce
        self._minted_at: dict[str, int] = {}

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, machine: Machine[Any], event: Event) -> Result:
        if machine.FLOW == "verification":
            self._consumed_message = "invalid verification token"
        effects = machine.handle(event)
        while True:
            reply: Event | None = None
            for effect in effects:
                if isinstance(effect, Fail):
                    await self._flush()
                    raise effect.exception()
                if isinstance(effect, Respond):
                    await self._flush()
                    return effect.result
                if isinstance(effect, Handoff):  # always the last effect: chain the next flow
                    return await self.run(MACHINES[effect.flow](self.env), effect.event)
                if effect.replies:
                    if not isinstance(effect, CreateUser):  # it commits what is queued
                        await self._flush()
                    reply = await self._answer(effect)
                else:
                    await self._do(effect)
            if reply is None:
                raise Internal("flow stopped without an answer")
            effects = machine.handle(reply)

    async def _flush(self) -> None:
        if self._sql:
            ops, self._sql = self._sql, []
            try:
                await self._commit(ops)
            except Consumed as consumed:
                # Someone else used the link or code first: the session kept for this use
                # never reaches the caller.
                for user_id, sid, nonce in self._kept:
                    await self.auth.sessions.delete(user_id, sid, nonce)
                await self._spent_meanwhile()
                raise InvalidArgument(consumed.message or self._consumed_message) from None
        outcomes, self._outcomes = self._outcomes, []
        for outcome in outcomes:
            self.auth.record_mfa_outcome(outcome.method, outcome.outcome)

    async def _commit(self, ops: list[SqlOp]) -> None:
        if len(ops) == 1 and isinstance(ops[0], OneInsert):
            await self.auth.storage.db.write_one(ops[0])  # a login's audit row, mostly
            return

        def apply(conn: sa.Connection) -> None:
            for op in ops:
                op(conn)

        await self.auth.storage.db.run(apply, write=True)

    async def _spent_meanwhile(self) -> None:
        """The second factor passed, but its code was spent by another request first (the
        commit's compare-and-set): for this request that is a failed attempt, recorded as
        a replayed code's is (audit row, count, webhook), in place of the success that was
        rolled back."""
        passed = [o for o in self._outcomes if o.outcome is MfaOutcome.PASSED]
        self._outcomes = []
        ops: list[SqlOp] = []
        for outcome in passed:
            record = AuditRecord(
                action=AuditAction.MFA_FAILED,
                actor_id=outcome.user_id,
                resource_id=outcome.user_id,
                metadata={"method": outcome.method.value, "spent_meanwhile": True},
            )
            ops.append(self._audit_op(record))
            failed = MFA_WEBHOOK_EVENTS[MfaOutcome.FAILED]
            if await self.auth.storage.webhook_listeners.listening(failed):
                ops.append(
                    outcome_webhook(outcome.user_id, outcome.method, MfaOutcome.FAILED, self._now)
                )
        if ops:
            await self._commit(ops)
        for outcome in passed:
            self.auth.record_mfa_outcome(outcome.method, MfaOutcome.FAILED)

    @property
    def _now(self) -> int:
        return int(self.auth.clock.now())

    # -- effects that answer ----------------------------------------------------------------

    async def _answer(self, effect: Effect) -> Event:
        db = self.auth.storage.db
        if isinstance(effect, LoadUser):
            loaded = await db.read(lambda conn: load_user(conn, effect))
            if loaded is not None:
                self.user_id = loaded.id
            return UserLoaded(user=loaded)
        if isinstance(effect, VerifyPasswordHash):
            hasher = self.auth.hasher
            if effect.password_hash is None:
                await hasher.verify_dummy(effect.password)
                return PasswordVerified(ok=False)
            ok, rehash = await hasher.verify(effect.password_hash, effect.password)
            return PasswordVerified(ok=ok, needs_rehash=ok and rehash)
        if isinstance(effect, HashPassword):
            return PasswordHashed(password_hash=await self.auth.hasher.hash(effect.password))
        if isinstance(effect, CreateUser):
            user, queued, self._sql = effect.user, self._sql, []

            def create(conn: sa.Connection) -> str | None:
                taken = user_rows.insert_unique(conn, user)
                if taken is None:
                    for op in queued:
                        op(conn)
                return taken

            taken = await db.run_locked(effect.lock_keys, create)
            if taken is not None:
                self.taken = taken
                return UserAlreadyExists()
            self.user_id = user.id
            return UserCreated(user=user)
        if isinstance(effect, IssueTokens):
            sid = self.sid or effect.nonce
            self.sid = sid
            # One time for the tokens and the code this login binds: a marker that ends
            # the other sessions at the tokens' time (DeleteUserSessions' keep_nonce) must
            # not refuse the code because a second ticked between the two.
            now = self._now
            if effect.state is not None and self.auth.state_binder is not None:
                effect = await self.auth.state_binder(effect, self.caller, sid, now)
            tokens = await self.auth.mint(effect, sid=sid, now=now)
            self._minted_at[tokens.nonce] = now
            return TokensIssued(tokens=tokens)
        if isinstance(effect, CreateVerificationRequest):
            return VerificationRequestCreated(token=await create_request(self.auth, effect))
        if isinstance(effect, LoadVerificationRequest):
            return await load_request(self.auth, effect)
        if isinstance(effect, LoadStoredToken):
            return StoredTokenLoaded(token=await self._stored(effect))
        if isinstance(effect, CheckRequiredRelations):
            try:
                await self.auth.require_relations(effect.user_id, effect.relations)
            except PermissionDenied:
                return RelationsChecked(allowed=False)
            return RelationsChecked(allowed=True)
        if isinstance(effect, DecideSecondFactor):
            mfa = self.auth.mfa_policy
            user = effect.user
            asks = mfa.enable_webauthn and mfa.applies_to(user)
            has_passkey = asks and await self._has_passkey(user.id)
            method = mfa.second_factor(user, effect.channel, has_passkey=has_passkey)
            if method is None:
                return SecondFactorNotRequired()
            return SecondFactorRequired(
                method=method,
                offers=mfa.setup_offers(user),
                passkey=mfa.passkey_usable(has_passkey),
            )
        if isinstance(effect, CHALLENGE_EFFECTS):
            found = await self.auth.challenges.execute(effect)
            if found is None:
                raise Internal(f"{type(effect).__name__} gave no answer")
            return found
        if isinstance(effect, AUTHENTICATOR_EFFECTS):
            return await self.auth.authenticators.execute(effect)
        raise Internal(f"no driver for {type(effect).__name__}")

    async def _has_passkey(self, user_id: str) -> bool:
        return await self.auth.storage.db.read(lambda conn: passkey_rows.has_any(conn, user_id))

    async def _stored(self, effect: LoadStoredToken) -> str | None:
        sessions, sid = self.auth.sessions, self.sid or ""
        value = await sessions.get(effect.user_id, sid, effect.nonce, effect.kind)
        if value is not None or not self.refresh or effect.kind != REFRESH:
            return value
        replaced = await sessions.replaced(effect.user_id, sid, effect.nonce)
        if replaced is None:
            return None
        if self.auth.clock.now() - replaced.at <= REFRESH_GRACE_SECONDS:
            # A duplicate of a refresh that just happened (two tabs at once): refused,
            # never a second live session; the family lives on in its successor.
            return None
        # A rotated-away refresh token came back after the grace window: a replay. End the
        # whole family, whoever holds its current token.
        await sessions.end_family(effect.user_id, sid)
        return None

    # -- effects that only act --------------------------------------------------------------

    async def _do(self, effect: Effect) -> None:
        auth = self.auth
        if isinstance(effect, UpdateUser):
            user = effect.user
            self._sql.append(lambda conn: user_rows.update(conn, user))
        elif isinstance(effect, RehashPassword):
            new_hash, now, user_id = (
                await auth.hasher.hash(effect.password),
                self._now,
                effect.user_id,
            )
            self._sql.append(
                lambda conn: user_rows.set_password_hash(conn, user_id, new_hash, now=now)
            )
        elif isinstance(effect, AuditRecord):
            self._sql.append(self._audit_op(effect))
        elif isinstance(effect, EmitWebhook):
            if await auth.storage.webhook_listeners.listening(effect.event.value):
                payload = {
                    "event_name": effect.event.value,
                    "user": effect.user.to_api_dict(),
                    "auth_recipe": effect.auth_recipe,
                }
                now = self._now
                self._sql.append(lambda conn: enqueue_item(conn, "webhook_event", payload, now))
        elif isinstance(effect, SendEmail):
            mail = await compose_mail(
                auth,
                effect.event.value,
                effect.to,
                {
                    "user": effect.user,
                    "verification_url": effect.verification_url,
                    "otp": effect.otp,
                },
                organization=(self.env.policy.organization_name, self.env.policy.organization_logo),
            )
            payload = dataclasses.asdict(mail)
            now = self._now
            self._sql.append(lambda conn: enqueue_item(conn, "mail", payload, now))
        elif isinstance(effect, SendSms):
            # Queued with the writes that caused it; the outbox texts it, with retries.
            message, now = {"to": effect.to, "body": effect.body}, self._now
            self._sql.append(lambda conn: enqueue_item(conn, "sms", message, now))
        elif isinstance(effect, DeleteVerificationRequest):
            request_id = effect.request_id
            self._sql.append(lambda conn: consume_request(conn, request_id))
        elif isinstance(effect, RecordTotpStep):
            user_id, step, now = effect.user_id, effect.step, self._now
            self._sql.append(lambda conn: record_totp_step(conn, user_id, step, now))
        elif isinstance(effect, UseRecoveryCode):
            user_id, digest, now = effect.user_id, effect.digest, self._now
            self._sql.append(lambda conn: use_recovery_code(conn, user_id, digest, now))
        elif isinstance(effect, PersistSession):
            await self._flush()
            sid = self.sid or effect.tokens.nonce
            await auth.sessions.persist(
                effect.user_id,
                sid,
                effect.tokens,
                ip=self.caller.client_ip,
                user_agent=self.caller.user_agent,
            )
            self._kept.append((effect.user_id, sid, effect.tokens.nonce))
            if effect.fresh_factor:
                await mark_fresh_factor(auth.storage.memory, sid)
        elif isinstance(effect, DeleteSession):
            await self._flush()
            await self._end_session(effect)
        elif isinstance(effect, DeleteUserSessions):
            await self._end_user_sessions(effect)
        elif isinstance(effect, SetSessionCookie):
            self.cookies.extend(auth.cookies.set(effect.value, auth.lifetimes.session))
        elif isinstance(effect, ClearSessionCookie):
            self.cookies.extend(auth.cookies.clear())
        elif isinstance(effect, CHALLENGE_EFFECTS):
            await self._flush()
            await auth.challenges.execute(effect)
        elif isinstance(effect, SetMfaCookie):
            self.cookies.extend(auth.cookies.set_mfa(effect.value, effect.max_age))
        elif isinstance(effect, ClearMfaCookie):
            self.cookies.extend(auth.cookies.clear_mfa())
        elif isinstance(effect, RecordMfaOutcome):
            if (
                effect.outcome is MfaOutcome.EXHAUSTED
                and not await auth.storage.memory.set_if_absent(
                    f"mfa:locked_notice:{effect.user_id}", b"1", ttl=otp.USER_GUESS_WINDOW
                )
            ):
                return  # this lock was announced already
            self._outcomes.append(effect)
            if await auth.storage.webhook_listeners.listening(MFA_WEBHOOK_EVENTS[effect.outcome]):
                self._sql.append(
                    outcome_webhook(effect.user_id, effect.method, effect.outcome, self._now)
                )
        else:
            raise Internal(f"no driver for {type(effect).__name__}")

    async def _end_session(self, effect: DeleteSession) -> None:
        sessions, sid = self.auth.sessions, self.sid or ""
        if self.refresh:
            # Claim the rotation: of concurrent refreshes with one token, only the one that
            # takes its stored copy goes on; the others persist nothing.
            old = await sessions.take_refresh(effect.user_id, sid, effect.nonce)
            if old is None:
                raise Unauthenticated(INVALID_REFRESH_TOKEN)
            await sessions.remember_replaced(effect.user_id, sid, effect.nonce, old)
        await sessions.delete(effect.user_id, sid, effect.nonce)

    async def _end_user_sessions(self, effect: DeleteUserSessions) -> None:
        """Every session ends; with ``end_links`` every emailed link still pending for the
        account too (a link requested before a password reset must not sign in after it);
        with ``end_credentials`` its passkeys and authenticator, in the same transaction.

        The marker refuses tokens issued before now, or before the kept session's tokens
        when this run minted them: a second may have passed since, and the marker must not
        refuse the session the flow keeps (the memory store ends the others exactly)."""
        user_id, now = effect.user_id, self._now
        if effect.keep_nonce is not None:
            now = min(now, self._minted_at.get(effect.keep_nonce, now))
        self._sql.append(lambda conn: user_rows.end_sessions_marker(conn, user_id, valid_after=now))
        if effect.end_links:
            self._sql.append(lambda conn: drop_pending_links(conn, user_id))
        if effect.end_credentials:
            self._sql.append(lambda conn: drop_credentials(conn, user_id))
        await self._flush()
        self.auth.sessions.forget_status(user_id)
        keep = (self.sid or "", effect.keep_nonce) if effect.keep_nonce else None
        try:
            await self.auth.sessions.end_memory_sessions(user_id, keep=keep)
        except StorageUnavailable as exc:
            # Committed: the marker refuses every older token (within the status cache's
            # second). An error now would report a change that happened as one that did
            # not, and its retry would find the link spent (issue 27).
            log.warning("sessions of %s left in the memory store: %s", user_id, exc)

    def _audit_op(self, effect: AuditRecord) -> SqlOp:
        entry, now = audit_entry(effect, self.caller), self._now
        return OneInsert(lambda conn: record_entry(conn, entry, now))
