"""The embedded authorization engine's operations: check and list permissions, the
``required_relations`` gate, and (inherited) the ``_fga_*`` admin operations.

Each method is a service operation (request mapping + caller -> Reply) that REST, GraphQL
and gRPC call alike. Evaluation is :mod:`core.fga` over the store read on demand through
this process's cache (:class:`~service.fga.engine.EngineState`), brought up to the
store's revision before every request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from bastion.core.errors import InvalidArgument, PermissionDenied
from bastion.core.fga.check import Checker, validate_check_object, validate_check_user
from bastion.core.fga.errors import FgaError
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.on_demand import RoundReader
from bastion.core.fga.request import RequestContext
from bastion.core.fga.tuples import TupleKey
from bastion.service import tracing
from bastion.service.context import CallerContext, Reply
from bastion.service.fga.administration import FgaAdministration
from bastion.service.fga.base import (
    CONTEXT_REFUSED,
    CONTEXTUAL_REFUSED,
    LIST_LIMIT,
    NOT_ENABLED,
    _CheckMetrics,
    _ParsedCheck,
    request_context,
)
from bastion.service.fga.engine import ActiveModel, EngineState
from bastion.service.fga.offload import Stop
from bastion.service.fga.requests import (
    MAX_CHECKS,
    CheckPermissionsRequest,
    ListPermissionsRequest,
    normalise_user,
    optional_text,
    subject,
)
from bastion.storage import reserved_connections

__all__ = ["CONTEXTUAL_REFUSED", "CONTEXT_REFUSED", "LIST_LIMIT", "NOT_ENABLED", "FgaService"]


class FgaService(FgaAdministration):
    async def _may_use_contextual(self, caller: CallerContext) -> None:
        """Contextual tuples are facts the caller asserts: only a super-admin may, by default.

        A user who could add them would grant itself any relation (issue 28).
        """
        if not self.allow_user_contextual and not await self.service.is_admin(caller):
            raise PermissionDenied(CONTEXTUAL_REFUSED)

    async def _may_use_context(self, caller: CallerContext) -> None:
        """A request context is what the caller asserts (the time, its address): only a
        super-admin's is honoured, by default (issue 36). ``--fga-server-context`` names
        the parameters the server fills instead."""
        if not self.allow_user_context and not await self.service.is_admin(caller):
            raise PermissionDenied(CONTEXT_REFUSED)

    async def _subject(self, explicit: str, caller: CallerContext) -> str:
        if explicit:
            explicit = subject(explicit)
        if await self.service.is_admin(caller):
            if not explicit:
                raise InvalidArgument("user is required when calling with admin credentials")
            return explicit
        own = await self._caller_subject(caller)
        if explicit and explicit != own:
            raise PermissionDenied("not authorized to query authorization for another subject")
        return own

    def _checker(
        self,
        engine: EngineState,
        model: ActiveModel,
        reader: RoundReader,
        user: str,
        contextual: Sequence[TupleKey] = (),
        context: Mapping[str, Any] | None = None,
        stop: Stop | None = None,
    ) -> Checker:
        """One round's evaluator for ``user`` over ``reader`` and the process's check cache
        (``stop``: the request's, for an evaluation off the loop).

        Checks that share it share its memo: a batch for one subject evaluates each common
        sub-problem (a group membership, a folder near the root) once. Raises FgaError for
        a malformed user or a bad contextual tuple (2027).
        """
        options = self._options(context or {}, stop, contextual_tuples=tuple(contextual))
        validate_check_user(model.ts, user)
        request = RequestContext(model.ts, reader, options)
        return Checker(request, engine.cache.scoped(engine.cache_scope, options, reader.misses))

    async def _checks(
        self,
        engine: EngineState,
        model: ActiveModel,
        operation: str,
        user: str,
        wanted: Sequence[_ParsedCheck],
        contexts: Sequence[Mapping[str, Any]],
        shared_context: Mapping[str, Any],
        stop: Stop | None = None,
    ) -> list[bool | FgaError]:
        """Each check's answer or its evaluation error (``contexts``: each check's, with the
        server's parameters; ``shared_context``: the checks without their own), the latency
        of each observed (its evaluation in the last round, and its share of the time spent
        fetching) and the errors counted; the caller counts the answers. Raises FgaError
        (counted) for a malformed user. With ``stop``, the rounds run off the loop."""
        metrics = self._check_metrics(operation)
        durations: list[float] = []

        def run(reader: RoundReader) -> list[bool | FgaError]:
            durations.clear()
            found: list[bool | FgaError] = []
            shared = self._checker(engine, model, reader, user, (), shared_context, stop)
            for (relation, obj, contextual, sent), context in zip(wanted, contexts, strict=True):
                started = time.perf_counter()
                try:
                    checker = (
                        self._checker(engine, model, reader, user, contextual, context, stop)
                        if contextual or sent
                        else shared
                    )
                    validate_check_object(model.ts, obj, relation)
                    found.append(checker.check(obj, relation, user))
                except FgaError as exc:
                    found.append(exc)
                durations.append(time.perf_counter() - started)
            return found

        # One span for the checks, over every round and its reads (a round runs again
        # after its reads are fetched: a span per round would count a check several times).
        attributes: dict[str, str | int] = {"fga.checks": len(wanted)}
        if len(wanted) == 1:
            attributes |= {"fga.relation": wanted[0][0], "fga.object": wanted[0][1]}
        started = time.perf_counter()
        try:
            with tracing.span("fga check", attributes):
                answers = await engine.evaluate(run, self._offload(stop))
        except FgaError:  # the user itself is malformed
            metrics.error.inc()
            raise
        waited = max(0.0, time.perf_counter() - started - sum(durations)) / len(wanted)
        for answer, duration in zip(answers, durations, strict=True):
            metrics.latency.observe(duration + waited)
            if isinstance(answer, FgaError):
                metrics.error.inc()
        return answers

    def _check_metrics(self, operation: str) -> _CheckMetrics:
        found = self._metric_children.get(operation)
        if found is None:
            checks = self.metrics.fga_checks
            found = self._metric_children[operation] = _CheckMetrics(
                checks.labels(operation, "allowed"),
                checks.labels(operation, "denied"),
                checks.labels(operation, "error"),
                self.metrics.fga_check_latency.labels(operation),
            )
        return found

    # -- public operations -----------------------------------------------------------------

    async def check_permissions(
        self, request: CheckPermissionsRequest, caller: CallerContext
    ) -> Reply:
        with self._counted("check_permissions"), reserved_connections():
            _, engine = self._enabled()
            checks = request.checks
            if checks is None or (isinstance(checks, list) and not checks):
                raise InvalidArgument("at least one check is required")
            if not isinstance(checks, list):
                raise InvalidArgument("checks must be a list")
            if len(checks) > MAX_CHECKS:
                raise InvalidArgument(f"too many checks: max {MAX_CHECKS} per request")
            parsed = [self._parse_check(c) for c in checks]
            # The generation read rides with the caller's authentication: one round trip.
            with engine.generation_ahead() as ahead:
                user = await self._subject(request.user, caller)
                if any(check[2] for check in parsed):
                    await self._may_use_contextual(caller)
                if any(check[3] for check in parsed):
                    await self._may_use_context(caller)
                await engine.fresh(ahead=ahead)
            model = engine.model
            if model is None:
                raise PermissionDenied("authorization check failed")
            server = self._context(model, caller)
            contexts = [
                self._context(model, caller, check[3]) if check[3] else server for check in parsed
            ]
            stop = Stop.for_request() if any(check[3] for check in parsed) else None
            operation = "check_permissions"
            answers = await self._checks(
                engine, model, operation, user, parsed, contexts, server, stop
            )
            metrics = self._check_metrics(operation)
            results: list[dict[str, Any]] = []
            allowed = denied = 0
            for (relation, obj, _, _), answer in zip(parsed, answers, strict=True):
                result: dict[str, Any] = {"relation": relation, "object": obj, "allowed": False}
                # An evaluation error (a missing condition parameter, an unknown relation)
                # is not a permission decision: it is reported on its own check and the
                # batch still answers.
                if isinstance(answer, FgaError):
                    result["error"] = {"code": "invalid_argument", "message": str(answer)}
                elif answer:
                    result["allowed"] = True
                    allowed += 1
                else:
                    denied += 1
                results.append(result)
            # Counted once per batch: a labelled counter's inc() is not cheap.
            if allowed:
                metrics.allowed.inc(allowed)
            if denied:
                metrics.denied.inc(denied)
            return Reply({"results": results})

    @staticmethod
    def _parse_check(raw: Any) -> _ParsedCheck:
        if not isinstance(raw, Mapping):
            raise InvalidArgument("each check requires relation and object")
        relation, obj = optional_text(raw, "relation"), optional_text(raw, "object")
        if not relation or not obj:
            raise InvalidArgument("each check requires relation and object")
        contextual = raw.get("contextual_tuples")
        context = raw.get("context")
        return (
            relation,
            obj,
            list(FgaService._contextual(contextual, "check")) if contextual else [],
            {} if context is None else request_context(context),
        )

    async def list_permissions(
        self, request: ListPermissionsRequest, caller: CallerContext
    ) -> Reply:
        with self._counted("list_permissions"), reserved_connections():
            _, engine = self._enabled()
            relation = request.relation
            object_type = request.object_type
            sent = request_context(request.context)
            contextual = self._contextual(request.contextual_tuples)
            with engine.generation_ahead() as ahead:  # as in check_permissions
                user = await self._subject(request.user, caller)
                if contextual:
                    await self._may_use_contextual(caller)
                if sent:
                    await self._may_use_context(caller)
                await engine.fresh(ahead=ahead)
            model = engine.model
            if model is None:
                raise PermissionDenied("authorization list failed")
            context = self._context(model, caller, sent)
            stop = Stop.for_request() if sent else None
            if relation and object_type:
                pairs = [(object_type, relation)]
            else:
                pairs = sorted(
                    (t.name, r)
                    for t in model.ts.model.type_definitions
                    for r in t.relations
                    if (not object_type or t.name == object_type)
                    and (not relation or r == relation)
                )
            # One deadline for the whole answer (Authorizer's cap stays its own).
            deadline = self.list_bounds.objects_deadline()

            def run(reader: RoundReader) -> dict[str, Any]:
                permissions: list[dict[str, str]] = []
                objects: dict[str, None] = {}
                truncated = False
                for type_name, rel in pairs:
                    options = self._options(
                        context,
                        stop,
                        max_results=LIST_LIMIT - len(permissions),
                        contextual_tuples=contextual,
                        deadline=deadline,
                    )
                    found = list_objects(
                        model.ts, reader, type_name, rel, user, options, graph=model.graph
                    )
                    for obj in found.items:
                        permissions.append({"object": obj, "relation": rel})
                        objects.setdefault(obj)
                    if found.truncated:
                        truncated = True
                        break
                return {
                    "objects": list(objects),
                    "permissions": permissions,
                    "truncated": truncated,
                }

            return Reply(await engine.evaluate(run, self._offload(stop)))

    async def require_relations(self, user: str, relations: Sequence[Mapping[str, Any]]) -> None:
        """``required_relations`` of session / validate_*: every one must hold (AND).

        An empty list passes; the engine off is FailedPrecondition; a denial or any engine
        error is PermissionDenied("unauthorized").
        """
        if not relations:
            return
        _, engine = self._enabled()
        wanted = []
        for item in relations:
            relation, obj = optional_text(item, "relation"), optional_text(item, "object")
            if not relation or not obj:
                raise InvalidArgument("each required relation needs relation and object")
            wanted.append((relation, obj))
        await engine.fresh()
        model = engine.model
        if model is None:
            raise PermissionDenied("unauthorized")
        user = normalise_user(user)
        operation = "required_relations"
        metrics = self._check_metrics(operation)
        try:
            answers = await self._checks(
                engine,
                model,
                operation,
                user,
                [(r, o, [], {}) for r, o in wanted],
                [{}] * len(wanted),
                {},
            )
        except FgaError:
            raise PermissionDenied("unauthorized") from None
        # Every answer counted, as each check of a batch; any denial or error refuses.
        for answer in answers:
            if isinstance(answer, bool):
                (metrics.allowed if answer else metrics.denied).inc()
        if not all(answer is True for answer in answers):
            raise PermissionDenied("unauthorized")

    # -- admin operations ------------------------------------------------------------------
