"""``SyncDriver``: the drivers' engine (``reference.engine``) run synchronously over any
``Storage`` (``reference.storage``), and ``HANDLED``, the effects the drivers carry out."""

from __future__ import annotations

from typing import Any

from bastion.core.auth.policy import FlowEnv
from bastion.core.reference.engine import Flows, Offload, Step
from bastion.core.reference.storage import Storage
from bastion.core.state_machines import (
    AuditRecord,
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
    GenerateCode,
    HashPassword,
    IssueTokens,
    LoadAuthenticator,
    LoadChallenge,
    LoadFactors,
    LoadStoredToken,
    LoadUser,
    LoadVerificationRequest,
    Machine,
    PersistSession,
    RecordMfaOutcome,
    RecordTotpStep,
    RehashPassword,
    SendEmail,
    SendSms,
    SetMfaCookie,
    SetSessionCookie,
    StoreChallenge,
    TakeChallenge,
    UpdateUser,
    UseRecoveryCode,
    VerifyPasswordHash,
)
from bastion.core.state_machines.effects import Result

__all__ = ["HANDLED", "SyncDriver"]


class SyncDriver(Flows):
    """Runs flows to their answer over a :class:`Storage`. One driver may serve many
    requests, one at a time; ``cookies`` holds what the last one set (``None``: cleared)."""

    def __init__(self, env: FlowEnv, store: Storage, **parts: Any) -> None:
        super().__init__(env, **parts)
        self.store = store

    def run(self, machine: Machine[Any], event: Event) -> Result:
        """Feed ``event`` and carry out the effects until the flow answers or refuses
        (raises the ``BastionError`` its ``Fail`` names)."""
        plan = self.plan(machine, event)
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = plan.send(reply) if error is None else plan.throw(error)
            except StopIteration as stop:
                result: Result = stop.value
                return result
            try:
                reply, error = self.perform(step), None
            except Exception as exc:
                reply, error = None, exc

    def perform(self, step: Step) -> Any:
        if isinstance(step, Offload):
            return step.work()
        return getattr(self.store, step.method)(*step.args)


_ANSWERS: frozenset[type[Effect]] = frozenset(
    {
        LoadUser,
        VerifyPasswordHash,
        HashPassword,
        CreateUser,
        IssueTokens,
        CreateVerificationRequest,
        LoadVerificationRequest,
        LoadStoredToken,
        CheckRequiredRelations,
        DecideSecondFactor,
        GenerateCode,
        CheckCode,
        LoadChallenge,
        TakeChallenge,
        CountAttempt,
        LoadAuthenticator,
        LoadFactors,
        EnrolAuthenticator,
    }
)

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
