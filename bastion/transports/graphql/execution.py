"""Running a GraphQL request under trio.

graphql-core 3.3 awaits sibling fields, async list items and concurrent ``is_type_of``
checks with ``asyncio.gather``, at every level of the result. Under trio that fails as
soon as two async fields meet (trio refuses asyncio's futures). :class:`TrioExecutor`
replaces each of those gathers with :func:`gather`, which runs the awaitables in a trio
nursery and keeps graphql-core's semantics:

* results come back in the order of the awaitables, whatever order they finish in;
* a field or item that fails gets caught by graphql-core itself (null plus an error
  with its path), so it never reaches the gather;
* a failure that does reach it (a non-null field erroring, which must null its parent)
  cancels the siblings and is raised as is, like graphql-core's ``gather_with_cancel``;
* cancellation from outside (a request deadline) passes straight through.

Nothing is ever left running in the background: where graphql-core would "settle" the
awaitables of siblings in the background after a synchronous error, we close them
unstarted (no task may outlive the request's nursery). ``@defer``/``@stream`` are not
part of the schema and are not supported.

:func:`execute_operation` is the one entry point for transports: size limit, parse,
operation limits, validation (with introspection optionally disabled), execution, and
the ``{data, errors}`` response with errors rendered by :mod:`.errors`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

import trio
from graphql import (
    DocumentNode,
    ExecutionResult,
    Executor,
    FieldNode,
    GraphQLError,
    GraphQLOutputType,
    GraphQLResolveInfo,
    GraphQLSchema,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    execute,
    parse,
    specified_rules,
    validate,
)
from graphql.pyutils import Path, Undefined

from bastion.core.errors import Unimplemented
from bastion.core.out_of_scope import OUT_OF_SCOPE_MESSAGE, is_out_of_scope

from .errors import INTERNAL_CODE, INTERNAL_MESSAGE, format_error
from .limits import (
    DEFAULT_LIMITS,
    DisabledIntrospectionRule,
    QueryLimits,
    check_body_size,
    check_operation_limits,
)

__all__ = ["TrioExecutor", "execute_operation", "gather"]

T = TypeVar("T")

_log = logging.getLogger("bastion.graphql")


async def gather(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all of ``awaitables`` concurrently in a trio nursery; results in order.

    The first exception cancels the rest and is re-raised unwrapped (not in an
    exception group), as ``asyncio.gather``-with-cancel would.
    """
    if len(awaitables) == 1:
        return [await awaitables[0]]
    results: list[Any] = [None] * len(awaitables)
    failures: list[Exception] = []

    async with trio.open_nursery() as nursery:

        async def settle(index: int, awaitable: Awaitable[T]) -> None:
            try:
                results[index] = await awaitable
            except Exception as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()

        for index, awaitable in enumerate(awaitables):
            nursery.start_soon(settle, index, awaitable)

    if failures:
        raise failures[0]
    return results


def _discard(awaitables: Iterable[object]) -> None:
    """Close coroutines that will never be awaited because a sibling already failed.

    graphql-core wraps a resolver's coroutine in completion coroutines; closing only
    the outer one would leave the inner one "never awaited". An unstarted coroutine
    still holds its arguments in its frame, so those are closed first, recursively.
    """
    for awaitable in awaitables:
        if not inspect.iscoroutine(awaitable):
            continue
        if inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED:
            frame = awaitable.cr_frame
            if frame is not None:
                _discard(frame.f_locals.values())
        awaitable.close()


async def _fill_in(container: Any, keys: Sequence[Any]) -> Any:
    """Replace ``container[key]`` (an awaitable) by its result, for every key, at once."""
    values = await gather([container[key] for key in keys])
    for key, value in zip(keys, values, strict=True):
        container[key] = value
    return container


class TrioExecutor(Executor[Any]):
    """graphql-core's executor with every concurrent await done in a trio nursery."""

    def execute_fields(
        self,
        parent_type: Any,
        source_value: Any,
        path: Path | None,
        grouped_field_set: Any,
        position_context: Any,
    ) -> Any:
        results: dict[str, Any] = {}
        pending: list[str] = []
        try:
            for response_name, field_details_list in grouped_field_set.items():
                result = self.execute_field(
                    parent_type,
                    source_value,
                    field_details_list,
                    Path(path, response_name, parent_type.name),
                    position_context,
                )
                if result is Undefined:
                    continue
                results[response_name] = result
                if self.is_awaitable(result):
                    pending.append(response_name)
        except Exception:
            _discard(results[name] for name in pending)
            raise
        return _fill_in(results, pending) if pending else results

    def complete_iterable_value(
        self,
        item_type: GraphQLOutputType,
        field_details_list: Any,
        info: GraphQLResolveInfo[Any],
        path: Path,
        items: Iterable[Any],
        position_context: Any,
    ) -> Any:
        completed: list[Any] = []
        pending: list[int] = []
        iterator = iter(items)
        try:
            for index, item in enumerate(iterator):
                item_path = path.add_key(index, None)
                if self.is_awaitable(item):
                    completed.append(
                        self.complete_awaitable_list_item_value(
                            item, item_type, field_details_list, info, item_path, position_context
                        )
                    )
                    pending.append(index)
                elif self.complete_list_item_value(
                    item,
                    completed,
                    item_type,
                    field_details_list,
                    info,
                    item_path,
                    position_context,
                ):
                    pending.append(index)
        except Exception:
            _discard(completed[index] for index in pending)
            if isinstance(items, list | tuple):
                _discard(items)  # items the loop never reached
            raise
        return _fill_in(completed, pending) if pending else completed

    async def complete_async_iterator_value(
        self,
        item_type: GraphQLOutputType,
        field_details_list: Any,
        info: GraphQLResolveInfo[Any],
        path: Path,
        async_iterator: AsyncIterator[Any],
        position_context: Any,
    ) -> list[Any]:
        # Read the source to its end, then complete the items as an ordinary list:
        # same results and errors, and their async work runs in our nursery.
        # (Cancellation arrives inside ``anext``, so an async generator unwinds itself.)
        items: list[Any] = []
        try:
            while True:
                try:
                    items.append(await anext(async_iterator))
                except StopAsyncIteration:
                    break
        except Exception as raw_error:
            _discard(items)
            nodes = [details.node for details in field_details_list]
            raise GraphQLError(
                str(raw_error), nodes, path=path.as_list(), original_error=raw_error
            ) from raw_error
        completed = self.complete_iterable_value(
            item_type, field_details_list, info, path, items, position_context
        )
        if self.is_awaitable(completed):
            completed = await completed
        return completed  # type: ignore[no-any-return]

    def gather_async_work(self, values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
        return gather(values)

    def settle_in_background(self, awaitables: list[Awaitable[Any]]) -> None:
        # trio has no background: work a failed parent no longer needs is dropped
        # unstarted, which is what cancelling it would amount to.
        _discard(awaitables)


def _errors_only(*errors: GraphQLError) -> dict[str, Any]:
    return {"data": None, "errors": [format_error(error) for error in errors]}


def _response(result: ExecutionResult) -> dict[str, Any]:
    response: dict[str, Any] = {"data": result.data}
    if result.errors:
        response["errors"] = [format_error(error) for error in result.errors]
    return response


#: Documents up to this size are remembered; bigger ones (rare, and a way to fill memory)
#: are prepared afresh each time.
_CACHEABLE_SOURCE_BYTES = 8192


def _prepare(
    schema: GraphQLSchema, source: str, operation_name: str | None, limits: QueryLimits
) -> DocumentNode | tuple[GraphQLError, ...]:
    if len(source) <= _CACHEABLE_SOURCE_BYTES:
        return _prepare_cached(schema, source, operation_name, limits)
    return _prepare_document(schema, source, operation_name, limits)


def _prepare_document(
    schema: GraphQLSchema, source: str, operation_name: str | None, limits: QueryLimits
) -> DocumentNode | tuple[GraphQLError, ...]:
    """Parse, measure against the limits and validate a document, once per distinct text.

    Clients send the same few documents over and over; parsing and validating them is
    most of what a small query costs in graphql-core, so the outcome (a document, or the
    errors that refuse it) is kept. Variables are not part of the key: they are coerced
    at execution, every time.
    """
    try:
        document = parse(source)
    except GraphQLSyntaxError as error:
        return (error,)
    over_limit = check_operation_limits(document, operation_name, limits)
    if over_limit is not None:
        return (over_limit,)
    if _asks_out_of_scope(document):
        return (GraphQLError(OUT_OF_SCOPE_MESSAGE, extensions={"code": Unimplemented.code}),)
    rules = list(specified_rules)
    if not limits.introspection:
        rules.append(DisabledIntrospectionRule)
    # With introspection off, "Did you mean ...?" hints would leak the schema anyway.
    invalid = validate(schema, document, rules, hide_suggestions=not limits.introspection)
    if invalid:
        return tuple(invalid)
    return document


def _asks_out_of_scope(document: DocumentNode) -> bool:
    """An operation's root field is one bastion leaves out (core.out_of_scope): answered
    ``unimplemented`` rather than as a field the schema lacks."""
    return any(
        isinstance(selection, FieldNode) and is_out_of_scope(selection.name.value)
        for definition in document.definitions
        if isinstance(definition, OperationDefinitionNode)
        for selection in definition.selection_set.selections
    )


_prepare_cached = lru_cache(maxsize=512)(_prepare_document)


async def execute_operation(
    schema: GraphQLSchema,
    source: str,
    variables: dict[str, Any] | None,
    operation_name: str | None,
    context_value: Any,
    *,
    limits: QueryLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """Run one GraphQL request; the response as a JSON-ready ``{data, errors}`` dict.

    ``errors`` is left out when there are none. A request refused before execution
    (too big, unparsable, over a limit, invalid) answers ``data: null``, as gqlgen does.
    ``context_value`` reaches every resolver as its first argument.
    """
    too_big = check_body_size(len(source.encode("utf-8", "surrogatepass")), limits)
    if too_big is not None:
        return _errors_only(too_big)
    if variables is not None and not isinstance(variables, dict):
        return _errors_only(GraphQLError("variables must be a JSON object"))
    prepared = _prepare(schema, source, operation_name, limits)
    if isinstance(prepared, tuple):
        return _errors_only(*prepared)
    document = prepared
    hide_suggestions = not limits.introspection
    try:
        result = execute(
            schema,
            document,
            context_value=context_value,
            variable_values=variables,
            operation_name=operation_name,
            executor_class=TrioExecutor,
            hide_suggestions=hide_suggestions,
        )
        if isinstance(result, Awaitable):
            result = await result
    except Exception:
        # Field errors never get here (graphql-core collects them); this is a bug.
        _log.exception("GraphQL execution failed outside any field")
        return {
            "data": None,
            "errors": [{"message": INTERNAL_MESSAGE, "extensions": {"code": INTERNAL_CODE}}],
        }
    return _response(result)
