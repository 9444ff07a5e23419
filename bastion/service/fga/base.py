"""What the authorization engine's operations share: the store and this process's
cached view of it, the caller's identity and admin rights, metrics and the audit trail.

Consistency: a tuple or model written through any server process is used by the next
request on every process sharing the store; with a read replica, once the replica has
replayed it (see :mod:`service.fga.engine`). Messages and
limits follow Authorizer's (reference §8).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import trio
from prometheus_client import Counter, Histogram

from bastion.core.errors import FailedPrecondition, InvalidArgument, Unauthenticated
from bastion.core.fga.cel_cost import DEFAULT_MAX_CONDITION_COST
from bastion.core.fga.conditions import (
    ConditionError,
    context_problem,
    convert_parameter,
    stored_context_problem,
)
from bastion.core.fga.request import (
    DEFAULT_LIST_DEADLINE,
    DEFAULT_MAX_RESULTS,
    Deadline,
    RequestOptions,
)
from bastion.core.fga.server_context import fill_server_context
from bastion.core.fga.tuples import TupleKey
from bastion.service.context import CallerContext
from bastion.service.fga.engine import ActiveModel, EngineCaches, EngineState, Offload
from bastion.service.fga.offload import EVALUATION_THREADS, Stop, off_loop
from bastion.service.fga.requests import MAX_CONTEXTUAL_TUPLES, parse_tuple
from bastion.service.metrics import Metrics
from bastion.storage.fga import (
    FgaStore,
)
from bastion.storage.sql.schema import audit_logs

__all__ = [
    "CONTEXTUAL_REFUSED",
    "CONTEXT_REFUSED",
    "LIST_LIMIT",
    "NOT_ENABLED",
    "FgaBase",
    "ListBounds",
]

log = logging.getLogger("bastion.fga")

NOT_ENABLED = "fga is not enabled on this server"
CONTEXTUAL_REFUSED = (
    "contextual tuples are honoured only for a super-admin caller "
    "(the server runs without --allow-user-contextual-tuples)"
)
CONTEXT_REFUSED = (
    "a request context is honoured only for a super-admin caller "
    "(the server runs without --allow-user-context)"
)
#: Entries in a list_permissions answer, and users in a list_users answer.
LIST_LIMIT = 1000
#: Read's page size when none (or an out-of-range one) is given.
READ_PAGE_SIZE = 100
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class _Service(Protocol):
    """What this module needs from :class:`service.access.Service`."""

    @property
    def storage(self) -> Any: ...

    async def is_admin(self, caller: CallerContext) -> bool: ...

    async def require_admin(self, caller: CallerContext) -> None: ...


def new_model_id(now: float) -> str:
    """A ULID, as OpenFGA names model versions: sortable by creation time."""
    value = (int(now * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def _page_size(raw: Any) -> int:
    if raw is None or raw == "":
        return READ_PAGE_SIZE
    try:
        size = int(raw)  # gRPC's JSON mapping renders int64 as a string
    except (TypeError, ValueError):
        raise InvalidArgument("page_size must be an integer") from None
    return size if 0 < size <= READ_PAGE_SIZE else READ_PAGE_SIZE


def _tuple_json(key: TupleKey) -> dict[str, Any]:
    out: dict[str, Any] = {"user": key.user, "relation": key.relation, "object": key.object}
    if key.condition:
        out["condition"] = {"name": key.condition, "context": dict(key.context or {})}
    return out


def _write_problem(model: ActiveModel, key: TupleKey) -> str | None:
    """Why ``key`` may not be written under ``model``: the engine's rule plus the context."""
    if key.user == f"{key.object}#{key.relation}":
        return "a tuple may not name its own userset as its user"
    problem = model.ts.tuple_problem(key)
    if problem is not None or not key.condition or not key.context:
        return problem
    if (too_large := stored_context_problem(key.context)) is not None:
        return too_large
    params = model.ts.model.conditions[key.condition].parameters
    for name, value in key.context.items():
        if name not in params:
            return f"unknown condition parameter {name!r}"
        try:
            convert_parameter(params[name], value, name)
        except ConditionError as exc:
            return str(exc)
    return None


@dataclass(frozen=True, slots=True)
class ListBounds:
    """ListObjects' and ListUsers' bounds (``--fga-list-*``): results at most (0: none)
    and seconds of evaluation (0: no deadline), OpenFGA's defaults."""

    objects_max: int = DEFAULT_MAX_RESULTS
    objects_seconds: float = DEFAULT_LIST_DEADLINE
    users_max: int = DEFAULT_MAX_RESULTS
    users_seconds: float = DEFAULT_LIST_DEADLINE

    def objects_deadline(self) -> Deadline | None:
        """A ListObjects' deadline, from now."""
        return Deadline.after(self.objects_seconds, time.monotonic)

    def users_deadline(self) -> Deadline | None:
        return Deadline.after(self.users_seconds, time.monotonic)


#: One check of a batch: relation, object, contextual tuples, request context.
_ParsedCheck = tuple[str, str, list[TupleKey], dict[str, Any]]


def request_context(context: Any) -> dict[str, Any]:
    """The request ``context`` (values for condition parameters), an object or absent."""
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise InvalidArgument("context must be an object")
    if (problem := context_problem(context)) is not None:
        raise InvalidArgument(problem)
    return dict(context)


@dataclass(frozen=True, slots=True)
class _CheckMetrics:
    """One operation's labelled metric children, looked up once (labels() is not cheap)."""

    allowed: Counter
    denied: Counter
    error: Counter
    latency: Histogram


class FgaBase:
    def __init__(
        self,
        service: _Service,
        store: FgaStore | None,
        metrics: Metrics,
        *,
        allow_user_contextual: bool = False,
        list_bounds: ListBounds = ListBounds(),
        caches: EngineCaches | None = None,
        allow_user_context: bool = False,
        server_context: Mapping[str, str] | None = None,
        max_condition_cost: int = DEFAULT_MAX_CONDITION_COST,
    ) -> None:
        self.service = service
        self.allow_user_contextual = allow_user_contextual
        #: ``--allow-user-context``, ``--fga-server-context`` (parameter -> source) and
        #: ``--fga-max-condition-cost``.
        self.allow_user_context = allow_user_context
        self.server_context = dict(server_context or {})
        self.max_condition_cost = max_condition_cost
        self.evaluation_threads = trio.CapacityLimiter(EVALUATION_THREADS)
        self.list_bounds = list_bounds
        self.store = store
        #: Every store's engine in this process shares them (``--fga-cache-mib``).
        self.caches = EngineCaches.sized() if caches is None else caches
        self.engine = None if store is None else EngineState(store, self.caches)
        self.metrics = metrics
        self._metric_children: dict[str, _CheckMetrics] = {}
        self._succeeded: dict[str, Counter] = {}

    async def warm_up(self) -> None:
        """Read the store's head (revision, latest model) at startup, so no request waits
        for it, then the store itself into the read cache if it fits in half of it
        (:meth:`EngineState.preload`). A failure only means requests read on demand."""
        if self.engine is None:
            return
        try:
            await self.engine.fresh()
            await self.engine.preload()
        except Exception:
            log.warning("authorization store not loaded at startup", exc_info=True)

    # -- plumbing ------------------------------------------------------------------------

    def _context(
        self, model: ActiveModel, caller: CallerContext, sent: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The caller's context with the server's values of ``--fga-server-context``
        parameters that the model's conditions declare (those always win)."""
        sent = sent or {}
        if not self.server_context:
            return dict(sent)
        declared = {
            name
            for condition in model.ts.model.conditions.values()
            for name in condition.parameters
        }
        filled = {n: s for n, s in self.server_context.items() if n in declared}
        return fill_server_context(sent, filled, now=time.time(), client_ip=caller.client_ip)

    def _options(
        self, context: Mapping[str, Any], stop: Stop | None, **more: Any
    ) -> RequestOptions:
        """An evaluation's options under this server's cost limit (``stop``: its request's,
        when it runs off the loop)."""
        return RequestOptions(
            context=context, max_condition_cost=self.max_condition_cost, stop=stop, **more
        )

    def _offload(self, stop: Stop | None) -> Offload | None:
        """Where an evaluation's rounds run: off the loop, within the request's deadline,
        for a request that sent a context (``stop``); else on the loop."""
        if stop is None:
            return None
        return lambda step: off_loop(step, stop, self.evaluation_threads)

    def _enabled(self) -> tuple[FgaStore, EngineState]:
        if self.store is None or self.engine is None:
            raise FailedPrecondition(NOT_ENABLED)
        return self.store, self.engine

    @contextmanager
    def _counted(self, operation: str) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.metrics.fga_operations.labels(operation, "error").inc()
            raise
        succeeded = self._succeeded.get(operation)
        if succeeded is None:  # looked up once, as _CheckMetrics
            succeeded = self._succeeded[operation] = self.metrics.fga_operations.labels(
                operation, "success"
            )
        succeeded.inc()

    async def _admin(self, caller: CallerContext) -> tuple[FgaStore, EngineState]:
        await self.service.require_admin(caller)
        return self._enabled()

    async def _model(self, engine: EngineState, *, consistent: bool = False) -> ActiveModel:
        await engine.fresh(consistent=consistent)
        if engine.model is None:
            raise FailedPrecondition("no authorization model written yet")
        return engine.model

    async def _audit(
        self,
        caller: CallerContext,
        action: str,
        resource_type: str,
        resource_id: str,
        **details: Any,
    ) -> None:
        row = {
            "id": str(uuid.uuid4()),
            "actor_id": "admin",
            "actor_type": "admin",
            "action": action,
            "resource_type": resource_type,
            "resource_id": resource_id,
            "ip_address": caller.client_ip[:45],
            "user_agent": caller.user_agent,
            "metadata": json.dumps({"protocol": caller.protocol.value, **details}),
            "created_at": int(time.time()),
        }
        await self.service.storage.db.run(
            lambda conn: conn.execute(audit_logs.insert().values(**row)), write=True
        )

    async def _caller_subject(self, caller: CallerContext) -> str:
        # The seam to user sessions (issue 3): the Service will resolve the caller's own
        # subject (``user:<sub>``) from the bearer token or session cookie, raising
        # Unauthenticated when there is none. Until the Service can do that, no non-admin
        # caller can be identified, which is what "unauthenticated" means.
        resolve = getattr(self.service, "caller_subject", None)
        if resolve is None:
            raise Unauthenticated("unauthorized")
        own: str = await resolve(caller)
        return own

    @staticmethod
    def _contextual(value: Any, per: str = "request") -> tuple[TupleKey, ...]:
        contextual = value or []
        if not isinstance(contextual, list):
            raise InvalidArgument("contextual_tuples must be a list")
        if len(contextual) > MAX_CONTEXTUAL_TUPLES:
            raise InvalidArgument(
                f"too many contextual tuples: max {MAX_CONTEXTUAL_TUPLES} per {per}"
            )
        return tuple(
            parse_tuple(t, "each contextual tuple requires user, relation and object")
            for t in contextual
        )
