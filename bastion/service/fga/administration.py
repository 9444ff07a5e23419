"""The authorization engine's ``_fga_*`` super-admin operations: the model, tuples
(written to the store in one transaction each), list users, expand, reset."""

from __future__ import annotations

import json
import logging
import time

from bastion.core.errors import FailedPrecondition, InvalidArgument
from bastion.core.fga.dsl_lexer import DslSyntaxError
from bastion.core.fga.dsl_parser import parse_dsl
from bastion.core.fga.dsl_printer import UnsupportedDslError, print_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.expand import expand
from bastion.core.fga.list_objects import ListResult
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.on_demand import RoundReader
from bastion.core.fga.validation import check_model
from bastion.service.context import CallerContext, Reply
from bastion.service.fga.base import (
    LIST_LIMIT,
    FgaBase,
    _page_size,
    _tuple_json,
    _write_problem,
    new_model_id,
    request_context,
)
from bastion.service.fga.offload import Stop
from bastion.service.fga.requests import (
    ExpandRequest,
    ListUsersRequest,
    ReadTuplesRequest,
    TuplesRequest,
    WriteModelRequest,
    normalise_user,
    parse_tuples,
)
from bastion.service.requests import EmptyRequest
from bastion.storage.fga import (
    StoredModel,
    StoreNotEmpty,
    TupleConflict,
    TupleFilter,
)

__all__ = ["FgaAdministration"]

log = logging.getLogger("bastion.fga")


class FgaAdministration(FgaBase):
    async def get_model(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        with self._counted("get_model"):
            _, engine = await self._admin(caller)
            await engine.fresh()
            model = engine.model
            return Reply({"id": model.id if model else "", "dsl": model.dsl if model else ""})

    async def write_model(self, request: WriteModelRequest, caller: CallerContext) -> Reply:
        with self._counted("write_model"):
            store, engine = await self._admin(caller)
            dsl = request.dsl
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

    async def write_tuples(self, request: TuplesRequest, caller: CallerContext) -> Reply:
        with self._counted("write_tuples"):
            store, engine = await self._admin(caller)
            keys = parse_tuples(request.tuples)
            # Validated against the primary's model, never a lagging replica's.
            model = await self._model(engine, consistent=True)
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

    async def delete_tuples(self, request: TuplesRequest, caller: CallerContext) -> Reply:
        with self._counted("delete_tuples"):
            store, _ = await self._admin(caller)
            keys = parse_tuples(request.tuples)
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

    async def read_tuples(self, request: ReadTuplesRequest, caller: CallerContext) -> Reply:
        with self._counted("read_tuples"):
            store, _ = await self._admin(caller)
            user = request.user
            where = TupleFilter(
                user=normalise_user(user) if user else "",
                relation=request.relation,
                object=request.object,
            )
            try:
                page = await store.read_tuples(
                    where, _page_size(request.page_size), request.continuation_token
                )
            except ValueError:
                raise InvalidArgument("invalid continuation token") from None
            return Reply(
                {
                    "tuples": [_tuple_json(k) for k in page.tuples],
                    "continuation_token": page.continuation_token,
                }
            )

    async def list_users(self, request: ListUsersRequest, caller: CallerContext) -> Reply:
        with self._counted("list_users"):
            _, engine = await self._admin(caller)
            obj = request.object
            relation = request.relation
            user_type = request.user_type
            if not obj or not relation or not user_type:
                raise InvalidArgument("object, relation and user_type are required")
            object_type, _, object_id = obj.partition(":")
            if not object_type or not object_id:
                raise InvalidArgument(f"object must be in type:id form, got {obj!r}")
            sent = request_context(request.context)
            model = await self._model(engine)
            context = self._context(model, caller, sent)
            stop = Stop.for_request() if sent else None
            options = self._options(
                context,
                stop,
                max_results=LIST_LIMIT,
                contextual_tuples=self._contextual(request.contextual_tuples),
                deadline=self.list_bounds.users_deadline(),
            )
            user_filter = UserFilter.parse(user_type)

            def run(reader: RoundReader) -> ListResult:
                return list_users(model.ts, reader, obj, relation, user_filter, options)

            found = await engine.evaluate(run, self._offload(stop))
            return Reply({"users": list(found.items)})

    async def expand(self, request: ExpandRequest, caller: CallerContext) -> Reply:
        with self._counted("expand"):
            _, engine = await self._admin(caller)
            relation, obj = request.relation, request.object
            if not relation or not obj:
                raise InvalidArgument("relation and object are required")
            model = await self._model(engine)
            tree = (await engine.evaluate(lambda reader: expand(model.ts, reader, obj, relation)))[
                "tree"
            ]
            return Reply({"tree": json.dumps(tree, separators=(",", ":"))})

    async def reset(self, request: EmptyRequest, caller: CallerContext) -> Reply:
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
