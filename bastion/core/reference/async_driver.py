"""``AsyncDriver``: the drivers' engine (``reference.driver``) awaited, for asyncio, trio or
any event loop.

It awaits what the storage's methods return when it is awaitable, so it runs over an
``AsyncStorage`` as over a synchronous ``Storage`` whose calls are quick (an in-memory
one). CPU-bound work (password hashing) goes to ``offload``: by default anyio's worker
threads (``pip install 'bastion-core[anyio]'``; anyio runs on asyncio and on trio), or
pass your own (``asyncio.to_thread``, ``trio.to_thread.run_sync``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from bastion.core.auth.policy import FlowEnv
from bastion.core.extras import import_extra
from bastion.core.reference.engine import Flows, Offload, Step
from bastion.core.reference.storage import AsyncStorage, Storage
from bastion.core.state_machines import Event, Machine, Result

__all__ = ["AsyncDriver", "Offloader"]

#: runs a callable away from the event loop and gives its result
Offloader = Callable[[Callable[[], Any]], Awaitable[Any]]


class AsyncDriver(Flows):
    """Runs flows to their answer over an ``AsyncStorage`` (or a quick ``Storage``). One
    driver serves one request at a time (``cookies`` and ``sid`` are the last run's):
    make one per request, or per task."""

    def __init__(
        self,
        env: FlowEnv,
        store: AsyncStorage | Storage,
        *,
        offload: Offloader | None = None,
        **parts: Any,
    ) -> None:
        super().__init__(env, **parts)
        self.store = store
        if offload is None:
            to_thread = import_extra("anyio.to_thread", extra="anyio", feature="AsyncDriver")
            offload = to_thread.run_sync
        self.offload: Offloader = offload

    async def run(self, machine: Machine[Any], event: Event) -> Result:
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
                reply, error = await self.perform(step), None
            except Exception as exc:
                reply, error = None, exc

    async def perform(self, step: Step) -> Any:
        if isinstance(step, Offload):
            return await self.offload(step.work)
        result = getattr(self.store, step.method)(*step.args)
        return await result if inspect.isawaitable(result) else result
