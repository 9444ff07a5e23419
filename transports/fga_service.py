"""The embedded authorization engine's operations: check/list permissions and ``_fga_*`` admin.

Each method is a service operation (request mapping + caller -> Reply) that REST, GraphQL
and gRPC call alike. Evaluation is :mod:`core.fga` over this process's in-memory index
(:class:`~transports.fga.engine.EngineState`), brought up to the store's revision before
every request; writes go to the store (:mod:`storage.fga`) in one transaction each.

Consistency: a tuple or model written through any server process is used by the next
request on every process sharing the store (see :mod:`transports.fga.engine`).
Messages and limits follow Authorizer's (reference §8).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import Counter, Histogram

from core.errors import FailedPrecondition, InvalidArgument, PermissionDenied, Unauthenticated
from core.fga.check import Checker, validate_check_object, validate_check_user
from core.fga.conditions import ConditionError, convert_parameter
from core.fga.dsl_lexer import DslSyntaxError
from core.fga.dsl_parser import parse_dsl
from core.fga.dsl_printer import UnsupportedDslError, print_model
from core.fga.errors import FgaError
from core.fga.expand import expand
from core.fga.list_objects import list_objects
from core.fga.list_users import UserFilter, list_users
from core.fga.request import RequestContext, RequestOptions
from core.fga.tuples import TupleKey
from core.fga.validation import check_model
from storage.fga import (
    FgaStore,
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
)
from storage.sql.schema import audit_logs
from transports.context import CallerContext, Reply
from transports.fga.engine import ActiveModel, EngineState
from transports.fga.requests import (
    MAX_CHECKS,
    MAX_CONTEXTUAL_TUPLES,
    normalise_user,
    optional_text,
    parse_tuple,
    parse_tuples,
    subject,
)
from transports.metrics import Metrics

__all__ = ["CONTEXTUAL_REFUSED", "LIST_LIMIT", "NOT_ENABLED", "FgaService"]

log = logging.getLogger("bastion.fga")

NOT_ENABLED = "fga is not enabled on this server"
CONTEXTUAL_REFUSED = (
    "contextual tuples are honoured only for a super-admin caller "
    "(the server runs without --allow-user-contextual-tuples)"
)
#: Entries in a list_permissions answer, and users in a list_users answer.
LIST_LIMIT = 1000
#: Read's page size when none (or an out-of-range one) is given.
READ_PAGE_SIZE = 100
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class _Service(Protocol):
    """What this module needs from :class:`transports.service.Service`."""

    @property
    def storage(self) -> Any: ...

    async def is_admin(self, caller: CallerContext) -> bool: ...

    async def require_admin(self, caller: CallerContext) -> None: ...


def new_model_id(now: float) -> str:
    """A ULID, as OpenFGA names model versions: sortable by creation time."""
    value = (int(now * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def _page_size(request: Mapping[str, Any]) -> int:
    raw = request.get("page_size")
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
    params = model.ts.model.conditions[key.condition].parameters
    for name, value in key.context.items():
        if name not in params:
            return f"unknown condition parameter {name!r}"
        try:
            convert_parameter(params[name], value, name)
        except ConditionError as exc:
            return str(exc)
    return None


#: One check of a batch: relation, object, contextual tuples, request context.
_ParsedCheck = tuple[str, str, list[TupleKey], dict[str, Any]]


def request_context(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The request ``context`` (values for condition parameters), an object or absent."""
    context = raw.get("context")
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise InvalidArgument("context must be an object")
    return dict(context)


@dataclass(frozen=True, slots=True)
class _CheckMetrics:
    """One operation's labelled metric children, looked up once (labels() is not cheap)."""

    allowed: Counter
    denied: Counter
    error: Counter
    latency: Histogram


class FgaService:
    def __init__(
        self,
        service: _Service,
        store: FgaStore | None,
        metrics: Metrics,
        *,
        allow_user_contextual: bool = False,
    ) -> None:
        self.service = service
        self.allow_user_contextual = allow_user_contextual
        self.store = store
        self.engine = None if store is None else EngineState(store)
        self.metrics = metrics
        self._metric_children: dict[str, _CheckMetrics] = {}

    async def warm_up(self) -> None:
        """Load the store into this process at startup, so no request waits for it.

        A failure only means the first request loads it instead.
        """
        if self.engine is None:
            return
        try:
            await self.engine.fresh()
        except Exception:
            log.warning("authorization store not loaded at startup", exc_info=True)

    # -- plumbing ------------------------------------------------------------------------

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
        self.metrics.fga_operations.labels(operation, "success").inc()

    async def _admin(self, caller: CallerContext) -> tuple[FgaStore, EngineState]:
        await self.service.require_admin(caller)
        return self._enabled()

    async def _model(self, engine: EngineState) -> ActiveModel:
        await engine.fresh()
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

    async def _may_use_contextual(self, caller: CallerContext) -> None:
        """Contextual tuples are facts the caller asserts: only a super-admin may, by default.

        A user who could add them would grant itself any relation (issue 28).
        """
        if not self.allow_user_contextual and not await self.service.is_admin(caller):
            raise PermissionDenied(CONTEXTUAL_REFUSED)

    async def _subject(self, request: Mapping[str, Any], caller: CallerContext) -> str:
        explicit = optional_text(request, "user")
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
        operation: str,
        user: str,
        contextual: Sequence[TupleKey] = (),
        context: Mapping[str, Any] | None = None,
    ) -> Checker:
        """One request's evaluator for ``user`` over the process index and cache.

        Checks that share it share its memo: a batch for one subject evaluates each common
        sub-problem (a group membership, a folder near the root) once. Raises FgaError
        (counted) for a malformed user or a bad contextual tuple (2027).
        """
        options = RequestOptions(contextual_tuples=tuple(contextual), context=context or {})
        try:
            validate_check_user(model.ts, user)
            request = RequestContext(model.ts, engine.index, options)
        except FgaError:
            self._check_metrics(operation).error.inc()
            raise
        return Checker(request, engine.cache.wrapper(engine.cache_scope, options))

    def _check(
        self,
        model: ActiveModel,
        operation: str,
        obj: str,
        relation: str,
        checker: Checker,
        user: str,
    ) -> bool:
        """One check on ``checker``; raises FgaError (counted) on failure."""
        metrics = self._check_metrics(operation)
        started = time.perf_counter()
        try:
            validate_check_object(model.ts, obj, relation)
            allowed = checker.check(obj, relation, user)
        except FgaError:
            metrics.error.inc()
            raise
        finally:
            metrics.latency.observe(time.perf_counter() - started)
        (metrics.allowed if allowed else metrics.denied).inc()
        return allowed

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

    async def check_permissions(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("check_permissions"):
            _, engine = self._enabled()
            checks = request.get("checks")
            if checks is None or (isinstance(checks, list) and not checks):
                raise InvalidArgument("at least one check is required")
            if not isinstance(checks, list):
                raise InvalidArgument("checks must be a list")
            if len(checks) > MAX_CHECKS:
                raise InvalidArgument(f"too many checks: max {MAX_CHECKS} per request")
            parsed = [self._parse_check(c) for c in checks]
            user = await self._subject(request, caller)
            if any(check[2] for check in parsed):
                await self._may_use_contextual(caller)
            await engine.fresh()
            model = engine.model
            if model is None:
                raise PermissionDenied("authorization check failed")
            operation = "check_permissions"
            shared = self._checker(engine, model, operation, user)
            results = [
                self._one_check(engine, model, operation, user, shared, check) for check in parsed
            ]
            return Reply({"results": results})

    def _one_check(
        self,
        engine: EngineState,
        model: ActiveModel,
        operation: str,
        user: str,
        shared: Checker,
        check: _ParsedCheck,
    ) -> dict[str, Any]:
        """One entry of a batch: ``allowed``, plus ``error`` when it could not be evaluated.

        An evaluation error (a missing condition parameter, an unknown relation) is not a
        permission decision: it is reported on its own check and the batch still answers.
        """
        relation, obj, contextual, context = check
        result: dict[str, Any] = {"relation": relation, "object": obj, "allowed": False}
        try:
            checker = (
                self._checker(engine, model, operation, user, contextual, context)
                if contextual or context
                else shared
            )
            result["allowed"] = self._check(model, operation, obj, relation, checker, user)
        except FgaError as exc:
            result["error"] = {"code": "invalid_argument", "message": str(exc)}
        return result

    @staticmethod
    def _parse_check(raw: Any) -> _ParsedCheck:
        if not isinstance(raw, Mapping):
            raise InvalidArgument("each check requires relation and object")
        relation, obj = optional_text(raw, "relation"), optional_text(raw, "object")
        if not relation or not obj:
            raise InvalidArgument("each check requires relation and object")
        return relation, obj, list(FgaService._contextual(raw, "check")), request_context(raw)

    @staticmethod
    def _contextual(raw: Mapping[str, Any], per: str = "request") -> tuple[TupleKey, ...]:
        contextual = raw.get("contextual_tuples") or []
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

    async def list_permissions(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("list_permissions"):
            _, engine = self._enabled()
            relation = optional_text(request, "relation")
            object_type = optional_text(request, "object_type")
            context = request_context(request)
            contextual = self._contextual(request)
            user = await self._subject(request, caller)
            if contextual:
                await self._may_use_contextual(caller)
            await engine.fresh()
            model = engine.model
            if model is None:
                raise PermissionDenied("authorization list failed")
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
            permissions: list[dict[str, str]] = []
            objects: dict[str, None] = {}
            truncated = False
            for type_name, rel in pairs:
                options = RequestOptions(
                    max_results=LIST_LIMIT - len(permissions),
                    context=context,
                    contextual_tuples=contextual,
                )
                found = list_objects(
                    model.ts, engine.index, type_name, rel, user, options, graph=model.graph
                )
                for obj in found.items:
                    permissions.append({"object": obj, "relation": rel})
                    objects.setdefault(obj)
                if found.truncated:
                    truncated = True
                    break
            return Reply(
                {"objects": list(objects), "permissions": permissions, "truncated": truncated}
            )

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
        try:
            checker = self._checker(engine, model, operation, user)
            for relation, obj in wanted:
                if not self._check(model, operation, obj, relation, checker, user):
                    raise PermissionDenied("unauthorized")
        except FgaError:
            raise PermissionDenied("unauthorized") from None

    # -- admin operations ------------------------------------------------------------------

    async def get_model(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("get_model"):
            _, engine = await self._admin(caller)
            await engine.fresh()
            model = engine.model
            return Reply({"id": model.id if model else "", "dsl": model.dsl if model else ""})

    async def write_model(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("write_model"):
            store, engine = await self._admin(caller)
            dsl = optional_text(request, "dsl")
            if not dsl:
                raise InvalidArgument("dsl is required")
            try:
                parsed = parse_dsl(dsl).model
                check_model(parsed)
                canonical = print_model(parsed)
            except (DslSyntaxError, UnsupportedDslError) as exc:
                raise InvalidArgument(f"invalid DSL: {exc}") from None
            except FgaError as exc:
                raise InvalidArgument(f"invalid DSL: {exc.message}") from None
            stored = StoredModel(new_model_id(time.time()), canonical)
            await store.write_model(stored)
            await engine.fresh()
            await self._audit(caller, "admin.fga_model_written", "fga_model", stored.id)
            return Reply({"id": stored.id, "dsl": stored.dsl})

    async def write_tuples(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("write_tuples"):
            store, engine = await self._admin(caller)
            keys = parse_tuples(request)
            model = await self._model(engine)
            for key in keys:
                problem = _write_problem(model, key)
                if problem is not None:
                    raise InvalidArgument(
                        f'invalid tuple "{key}": {problem} — the relation and object type '
                        "must be defined in the active authorization model (Step 1)"
                    )
            try:
                await store.write_tuples(keys)
            except TupleConflict as conflict:
                raise InvalidArgument(
                    f'cannot write a tuple which already exists: "{conflict.key}"'
                ) from None
            await self._audit(
                caller, "admin.fga_tuples_written", "fga_tuple", str(keys[0]), count=len(keys)
            )
            return Reply({"message": "Tuples written successfully"})

    async def delete_tuples(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("delete_tuples"):
            store, _ = await self._admin(caller)
            keys = parse_tuples(request)
            try:
                await store.write_tuples((), keys)
            except TupleConflict as conflict:
                raise InvalidArgument(
                    f'cannot delete a tuple which does not exist: "{conflict.key}"'
                ) from None
            await self._audit(
                caller, "admin.fga_tuples_deleted", "fga_tuple", str(keys[0]), count=len(keys)
            )
            return Reply({"message": "Tuples deleted successfully"})

    async def read_tuples(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("read_tuples"):
            store, _ = await self._admin(caller)
            user = optional_text(request, "user")
            where = TupleFilter(
                user=normalise_user(user) if user else "",
                relation=optional_text(request, "relation"),
                object=optional_text(request, "object"),
            )
            try:
                page = await store.read_tuples(
                    where, _page_size(request), optional_text(request, "continuation_token")
                )
            except ValueError:
                raise InvalidArgument("invalid continuation token") from None
            return Reply(
                {
                    "tuples": [_tuple_json(k) for k in page.tuples],
                    "continuation_token": page.continuation_token,
                }
            )

    async def list_users(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("list_users"):
            _, engine = await self._admin(caller)
            obj = optional_text(request, "object")
            relation = optional_text(request, "relation")
            user_type = optional_text(request, "user_type")
            if not obj or not relation or not user_type:
                raise InvalidArgument("object, relation and user_type are required")
            object_type, _, object_id = obj.partition(":")
            if not object_type or not object_id:
                raise InvalidArgument(f"object must be in type:id form, got {obj!r}")
            model = await self._model(engine)
            found = list_users(
                model.ts,
                engine.index,
                obj,
                relation,
                UserFilter.parse(user_type),
                RequestOptions(
                    max_results=LIST_LIMIT,
                    context=request_context(request),
                    contextual_tuples=self._contextual(request),
                ),
            )
            return Reply({"users": list(found.items)})

    async def expand(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("expand"):
            _, engine = await self._admin(caller)
            relation, obj = optional_text(request, "relation"), optional_text(request, "object")
            if not relation or not obj:
                raise InvalidArgument("relation and object are required")
            model = await self._model(engine)
            tree = expand(model.ts, engine.index, obj, relation)["tree"]
            return Reply({"tree": json.dumps(tree, separators=(",", ":"))})

    async def reset(self, request: dict[str, Any], caller: CallerContext) -> Reply:
        with self._counted("reset"):
            store, engine = await self._admin(caller)
            try:
                await store.reset()
            except StoreNotEmpty:
                raise FailedPrecondition(
                    "remove all relationship tuples before resetting the authorization model"
                ) from None
            await engine.fresh()
            await self._audit(caller, "admin.fga_reset", "fga_model", "")
            return Reply({"message": "Authorization model reset successfully"})
