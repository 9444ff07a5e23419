"""Requests that mail a link, answered before any work that depends on the account.

``forgot_password``, ``resend_verify_email`` and ``magic_link_login`` answer every
address alike, but doing the work (a link signed, a request row and a mail written) for
known addresses only made known ones measurably slower: timing told which addresses
have accounts. So the request does the same work for every address: the flow is
rehearsed as for an address nobody has (which yields the answer every address gets, and
every refusal that does not depend on the account), and the flow itself is queued in the
outbox, in one small insert, to run for real moments later.

Whichever process claims the queued flow runs it, so the item carries the requester's
:class:`~core.auth.policy.AuthPolicy` (its URL, the links' base; its switches and
lifetimes): a fleet whose members' flags differ for a while (a rolling change) mails the
link the caller was answered for.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.errors import ClientError, Internal
from bastion.core.state_machines import MagicLinkMachine, PasswordResetMachine, VerificationMachine
from bastion.core.state_machines._machine import Effect, Event, Machine
from bastion.core.state_machines.effects import CreateUser, CreateVerificationRequest, LoadUser
from bastion.core.state_machines.events import UserCreated, UserLoaded, VerificationRequestCreated
from bastion.core.state_machines.magic_link import MagicLinkRequested
from bastion.core.state_machines.password_reset import ForgotPasswordRequested
from bastion.core.state_machines.verification import ResendVerifyEmailRequested
from bastion.service.auth.driver import FlowRun
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.outbox import PermanentFailure
from bastion.storage.outbox import OutboxItem, enqueue

if TYPE_CHECKING:
    from bastion.service.auth.parts import AuthParts

__all__ = ["MAILED_LINK", "MailedLinks"]

log = logging.getLogger("bastion.auth")

#: The outbox kind of a queued flow.
MAILED_LINK = "mailed_link"


class Flow(enum.StrEnum):
    FORGOT_PASSWORD = "forgot_password"
    RESEND_VERIFY_EMAIL = "resend_verify_email"
    MAGIC_LINK_LOGIN = "magic_link_login"


_FLOWS: dict[Flow, tuple[type[Event], Callable[[FlowEnv], Machine[Any]]]] = {
    Flow.FORGOT_PASSWORD: (ForgotPasswordRequested, PasswordResetMachine),
    Flow.RESEND_VERIFY_EMAIL: (ResendVerifyEmailRequested, VerificationMachine),
    Flow.MAGIC_LINK_LOGIN: (MagicLinkRequested, MagicLinkMachine),
}


def _with_tuples(fields: dict[str, Any]) -> dict[str, Any]:
    """A frozen dataclass's fields read back from JSON: its tuples came back as lists."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}


class _Rehearsal(FlowRun):
    """Runs a flow as if no account had the address, touching nothing: reads answer
    "nobody", writes are dropped, a new account or link is imagined."""

    async def _answer(self, effect: Effect) -> Event:
        if isinstance(effect, LoadUser):
            return UserLoaded(user=None)
        if isinstance(effect, CreateUser):
            return UserCreated(user=effect.user)
        if isinstance(effect, CreateVerificationRequest):
            return VerificationRequestCreated(token="rehearsal")
        raise Internal(f"a mailed-link flow asked for {type(effect).__name__}")

    async def _do(self, effect: Effect) -> None:
        return None

    async def _flush(self) -> None:
        return None


class MailedLinks:
    def __init__(self, auth: AuthParts) -> None:
        self._auth = auth

    async def answer(self, flow: Flow, event: Event, caller: CallerContext) -> Reply:
        """The answer every address gets (or a refusal that holds for every address);
        the flow itself runs from the outbox."""
        kind, machine = _FLOWS[flow]
        if not isinstance(event, kind):
            raise Internal(f"{flow} takes {kind.__name__}")
        rehearsal = _Rehearsal(self._auth, caller)
        result = await rehearsal.run(machine(self._auth.env), event)
        payload = {
            "flow": flow.value,
            "event": dataclasses.asdict(event),
            "client_ip": caller.client_ip,
            "user_agent": caller.user_agent,
            "protocol": caller.protocol.value,
            "policy": dataclasses.asdict(self._auth.policy),
        }
        now = self._auth.clock.now()
        await self._auth.storage.db.run(
            lambda conn: enqueue(conn, MAILED_LINK, payload, now=now), write=True
        )
        return Reply(result.to_api_dict(), tuple(rehearsal.cookies))

    async def carry_out(self, item: OutboxItem) -> None:
        """The outbox handler: the queued flow, for real, as its caller asked for it."""
        payload = item.payload
        flow = Flow(payload["flow"])
        kind, machine = _FLOWS[flow]
        fields = _with_tuples(payload["event"])
        caller = CallerContext(
            protocol=Protocol(payload["protocol"]),
            client_ip=payload["client_ip"],
            user_agent=payload["user_agent"],
        )
        env = self._requesters_env(payload)
        try:
            await FlowRun(self._auth, caller, env=env).run(machine(env), kind(**fields))
        except ClientError as exc:
            # A refusal that depends on the account (a revoked one, a protected role):
            # the caller was answered like everyone else; retrying cannot change it.
            log.info("queued %s refused: %s", flow.value, exc)
            raise PermanentFailure(flow.value) from None

    def _requesters_env(self, payload: dict[str, Any]) -> FlowEnv:
        """This process's clock and ids with the policy the request was answered under
        (an item queued before the policy was carried: this process's own)."""
        own = self._auth.env
        fields = payload.get("policy")
        if fields is None:
            return own
        return FlowEnv(policy=AuthPolicy(**_with_tuples(fields)), clock=own.clock, ids=own.ids)

    def handlers(self) -> dict[str, Callable[[OutboxItem], Awaitable[None]]]:
        return {MAILED_LINK: self.carry_out}
