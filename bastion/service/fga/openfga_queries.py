"""OpenFGA's query API (Check, BatchCheck, Expand, ListObjects, ListUsers) over one store,
and what every OpenFGA operation shares: the key, the store and its engine, the model.

The caller of this API presents the pre-shared key (``--openfga-api-key``), OpenFGA's own
method: it is an administrator of every store, so contextual tuples are honoured.
"""

from __future__ import annotations

import hmac
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import trio
import trio.lowlevel

from bastion.core.errors import InvalidArgument
from bastion.core.fga.check import check
from bastion.core.fga.errors import FgaError
from bastion.core.fga.expand import expand
from bastion.core.fga.list_objects import ObjectSearch, list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.on_demand import RoundReader
from bastion.core.fga.request import RequestOptions
from bastion.service.fga.engine import ActiveModel, EngineState
from bastion.service.fga.offload import Stop
from bastion.service.fga.openfga_input import (
    OpenFgaError,
    as_openfga_error,
    context_of,
    higher_consistency,
    tuple_key,
    tuple_keys,
    user_json,
    validation,
)
from bastion.service.fga.service import FgaService
from bastion.storage.fga import FgaStore, StoredModel
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, FgaStores

__all__ = ["OpenFgaQueries"]

T = TypeVar("T")
#: Checks per BatchCheck (OpenFGA's maxChecksPerBatchCheck default).
MAX_BATCH_CHECKS = 50
#: Model versions other than the latest kept parsed, per process.
_OLD_MODELS = 32
#: gRPC's status code for an OpenFGA HTTP status, in a stream's error message (what
#: grpc-gateway writes: ``{"error": {"code", "message", "details"}}``).
_GRPC_CODES = {400: 3, 404: 5, 409: 6, 422: 3, 429: 8, 500: 13, 503: 14, 504: 4}


def _refused(body: Callable[[RoundReader], T]) -> Callable[[RoundReader], T]:
    def run(reader: RoundReader) -> T:
        try:
            return body(reader)
        except InvalidArgument as exc:
            raise as_openfga_error(exc) from None

    return run


def _searched(
    reader: RoundReader, model: ActiveModel, target: tuple[str, str, str], options: RequestOptions
) -> tuple[list[str], FgaError | None]:
    """A StreamedListObjects search run whole: the objects it confirmed, and the error
    that stopped it (none when it ended or its deadline passed)."""
    search = ObjectSearch(model.ts, reader, *target, options, graph=model.graph)
    found: list[str] = []
    try:
        found.extend(search)
    except FgaError as exc:  # a depth error: the last message, after what was found
        return found, exc
    return found, None if search.timed_out else search.error


class OpenFgaQueries:
    def __init__(self, fga: FgaService, stores: FgaStores | None, api_key: str) -> None:
        self.fga = fga
        self.stores = stores
        self._key = api_key.encode()
        self._engines: dict[str, EngineState] = {}
        self._models: OrderedDict[str, ActiveModel] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Served only with ``--openfga-api-key`` and an engine store."""
        return bool(self._key) and self.stores is not None and self.fga.engine is not None

    def authenticate(self, authorization: str) -> None:
        """OpenFGA's pre-shared key: ``Authorization: Bearer KEY``, compared in constant time."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise OpenFgaError(401, "bearer_token_missing", "missing bearer token")
        if not hmac.compare_digest(token.strip().encode(), self._key):
            raise OpenFgaError(401, "unauthenticated", "unauthenticated")

    def _registry(self) -> FgaStores:
        if self.stores is None:
            raise OpenFgaError(404, "store_id_not_found", "store_id_not_found")
        return self.stores

    async def _store(self, store_id: str) -> tuple[FgaStore, EngineState]:
        """The store's view and this process's engine for it; 404 when there is none."""
        stores = self._registry()
        if await stores.get(store_id) is None:
            self._engines.pop(store_id, None)
            raise OpenFgaError(404, "store_id_not_found", "store_id_not_found")
        if store_id == DEFAULT_FGA_STORE and self.fga.engine is not None:
            return self.fga.engine.store, self.fga.engine
        engine = self._engines.get(store_id)
        if engine is None:
            engine = self._engines[store_id] = EngineState(stores.store(store_id), self.fga.caches)
        return engine.store, engine

    async def _model(
        self, store_id: str, engine: EngineState, model_id: str, *, consistent: bool = False
    ) -> ActiveModel:
        """The model a request names (``authorization_model_id``), else the store's latest;
        ``consistent``: the engine as of the primary (see :meth:`EngineState.fresh`)."""
        await engine.fresh(consistent=consistent)
        current = engine.model
        if not model_id:
            if current is None:
                raise OpenFgaError(
                    400,
                    "latest_authorization_model_not_found",
                    f"No authorization models found for store '{store_id}'",
                )
            return current
        if current is not None and current.id == model_id:
            return current
        found = self._models.get(model_id)
        if found is None:
            version = await self._registry().model(store_id, model_id)
            if version is None:
                raise OpenFgaError(
                    400,
                    "authorization_model_not_found",
                    f"Authorization Model '{model_id}' not found",
                )
            found = ActiveModel.load(StoredModel(version.id, version.dsl))
            self._models[model_id] = found
            while len(self._models) > _OLD_MODELS:
                self._models.popitem(last=False)
        self._models.move_to_end(model_id)
        return found

    async def _evaluation(
        self, store_id: str, body: Mapping[str, Any]
    ) -> tuple[EngineState, ActiveModel]:
        _, engine = await self._store(store_id)
        model_id = body.get("authorization_model_id") or ""
        if not isinstance(model_id, str):
            raise validation("authorization_model_id must be a string")
        consistent = higher_consistency(body.get("consistency"))
        return engine, await self._model(store_id, engine, model_id, consistent=consistent)

    def _options(self, raw: Mapping[str, Any], contextual: Any) -> RequestOptions:
        """A request's options; one with a context carries its request's :class:`Stop`
        and is evaluated off the loop (:meth:`_evaluate`)."""
        context = context_of(raw.get("context"))
        return RequestOptions(
            context=context,
            contextual_tuples=tuple_keys(contextual, "contextual_tuples"),
            max_condition_cost=self.fga.max_condition_cost,
            stop=Stop.for_request() if context else None,
        )

    async def _evaluate(
        self,
        engine: EngineState,
        body: Callable[[RoundReader], T],
        stop: Callable[[], bool] | None,
    ) -> T:
        """``body`` over the store read on demand, with its refusals as OpenFGA's errors;
        its rounds in a worker thread when its request carries a context (see
        :mod:`service.fga.offload`)."""
        offload = self.fga._offload(stop) if isinstance(stop, Stop) else None
        return await engine.evaluate(_refused(body), offload)

    # -- operations ----------------------------------------------------------------------

    async def check(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        engine, model = await self._evaluation(store_id, body)
        key = tuple_key(body.get("tuple_key"))
        options = self._options(body, body.get("contextual_tuples"))
        allowed = await self._evaluate(
            engine,
            lambda reader: check(model.ts, reader, key.object, key.relation, key.user, options),
            options.stop,
        )
        return {"allowed": allowed, "resolution": ""}

    async def batch_check(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """One result per ``correlation_id``; a check that fails carries its own error."""
        engine, model = await self._evaluation(store_id, body)
        checks = body.get("checks")
        if not isinstance(checks, list) or not checks:
            raise validation("checks: at least one check is required")
        if len(checks) > MAX_BATCH_CHECKS:
            raise validation(f"checks: at most {MAX_BATCH_CHECKS} per batch")
        parsed = []
        for item in checks:
            if not isinstance(item, Mapping):
                raise validation("each check must be an object")
            correlation = item.get("correlation_id")
            if not isinstance(correlation, str) or not correlation:
                raise validation("correlation_id is required")
            parsed.append(
                (
                    correlation,
                    tuple_key(item.get("tuple_key")),
                    self._options(item, item.get("contextual_tuples")),
                )
            )
        if len({c for c, _, _ in parsed}) != len(parsed):
            raise validation("correlation_id must be unique within a batch")
        # One Stop for the batch: a cancelled request stops every check of it.
        stop = next((o.stop for _, _, o in parsed if o.stop is not None), None)
        parsed = [(c, k, replace(o, stop=stop if o.stop else None)) for c, k, o in parsed]

        def run(reader: RoundReader) -> dict[str, Any]:
            result: dict[str, Any] = {}
            for correlation, key, options in parsed:
                try:
                    allowed = check(model.ts, reader, key.object, key.relation, key.user, options)
                    result[correlation] = {"allowed": allowed}
                except InvalidArgument as exc:
                    error = as_openfga_error(exc)
                    result[correlation] = {
                        "allowed": False,
                        "error": {"input_error": error.code, "message": error.message},
                    }
            return {"result": result}

        return await self._evaluate(engine, run, stop)

    async def expand(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        engine, model = await self._evaluation(store_id, body)
        key = tuple_key(body.get("tuple_key"), parts=())
        options = self._options(body, body.get("contextual_tuples"))
        return await self._evaluate(
            engine,
            lambda reader: expand(model.ts, reader, key.object, key.relation, options),
            options.stop,
        )

    async def list_objects(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        bounds = self.fga.list_bounds
        engine, model, target, options = await self._list_request(store_id, body)
        options = replace(
            options, max_results=bounds.objects_max, deadline=bounds.objects_deadline()
        )
        found = await self._evaluate(
            engine,
            lambda reader: list_objects(model.ts, reader, *target, options, graph=model.graph),
            options.stop,
        )
        return {"objects": list(found.items)}

    async def streamed_list_objects(
        self, store_id: str, body: Mapping[str, Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """StreamedListObjects' messages: no result bound, the deadline as ListObjects'.
        The search runs in rounds (its reads fetched from the store between them), then
        its objects stream out. A refusal of the request is raised here, before any
        message; an error met while searching is the last message."""
        engine, model, target, options = await self._list_request(store_id, body)
        options = replace(options, max_results=0, deadline=self.fga.list_bounds.objects_deadline())
        found, error = await self._evaluate(
            engine, lambda reader: _searched(reader, model, target, options), options.stop
        )
        return _stream(found, error)

    async def _list_request(
        self, store_id: str, body: Mapping[str, Any]
    ) -> tuple[EngineState, ActiveModel, tuple[str, str, str], RequestOptions]:
        engine, model = await self._evaluation(store_id, body)
        wanted = {name: body.get(name) for name in ("type", "relation", "user")}
        for name, value in wanted.items():
            if not isinstance(value, str) or not value:
                raise validation(f"{name} is required")
        target = (str(wanted["type"]), str(wanted["relation"]), str(wanted["user"]))
        return engine, model, target, self._options(body, body.get("contextual_tuples"))

    async def list_users(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        engine, model = await self._evaluation(store_id, body)
        obj, relation = body.get("object"), body.get("relation")
        if not isinstance(obj, Mapping) or not obj.get("type") or not obj.get("id"):
            raise validation("object: type and id are required")
        if not isinstance(relation, str) or not relation:
            raise validation("relation is required")
        filters = body.get("user_filters")
        if not isinstance(filters, list) or len(filters) != 1:
            raise validation("user_filters: exactly one filter is required")
        [raw_filter] = filters
        if not isinstance(raw_filter, Mapping) or not raw_filter.get("type"):
            raise validation("user_filters: type is required")
        user_filter = UserFilter(str(raw_filter["type"]), str(raw_filter.get("relation") or ""))
        bounds = self.fga.list_bounds
        options = replace(
            self._options(body, body.get("contextual_tuples")),
            max_results=bounds.users_max,
            deadline=bounds.users_deadline(),
        )
        found = await self._evaluate(
            engine,
            lambda reader: list_users(
                model.ts, reader, f"{obj['type']}:{obj['id']}", relation, user_filter, options
            ),
            options.stop,
        )
        return {"users": [user_json(u) for u in found.items]}


async def _stream(found: list[str], error: FgaError | None) -> AsyncIterator[dict[str, Any]]:
    """The search's objects as StreamedListObjects' messages, then its error if one
    stopped it; between two, the loop serves others (and the message goes out)."""
    for obj in found:
        yield {"result": {"object": obj}}
        await trio.lowlevel.checkpoint()
    if error is not None:
        failure = as_openfga_error(error)
        code = _GRPC_CODES.get(failure.status, 2)
        yield {"error": {"code": code, "message": failure.message, "details": []}}
