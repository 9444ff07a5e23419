"""The executor under trio: concurrent siblings, nesting, lists, errors, cancellation.

The schema here is a small one of our own with async resolvers at every level, because
Authorizer's schema only has async fields at the root (the service calls); the executor
must hold for any shape the lead's resolvers give it.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import AsyncIterator
from typing import Any

import graphql
import pytest
import trio
import trio.lowlevel
import trio.testing

from bastion.core.errors import NotFound
from bastion.transports.graphql.execution import TrioExecutor, execute_operation, gather

SDL = """
type Query {
  a: String
  b: String
  c: String
  boom: String
  strict: Node
  node: Node
  items: [Node!]
  nodes: [Node]
  awaitable_items: [String]
  streamed: [Node]
  streamed_broken: [Node]
  forever: String
  sync_required: String!
  endless: [Node]
  pets: [Pet]
}
union Pet = Cat | Dog
type Cat { name: String meows: Boolean }
type Dog { name: String barks: Boolean }
type Mutation { first: String second: String }
type Node {
  id: ID!
  name: String
  required: String!
  child: Node
  is_even: Boolean
}
"""


class Probe:
    """Shared state for the resolvers of one test."""

    def __init__(self) -> None:
        self.b_started = trio.Event()
        self.log: list[str] = []


async def resolve_a(_root: object, info: Any) -> str:
    # Waits for b: if siblings ran one after another, this would never return.
    await info.context.b_started.wait()
    return "A"


async def resolve_b(_root: object, info: Any) -> str:
    info.context.b_started.set()
    await trio.sleep(1)
    return "B"


async def resolve_c(_root: object, _info: Any) -> str:
    await trio.lowlevel.checkpoint()
    return "C"


async def resolve_boom(_root: object, _info: Any) -> str:
    await trio.lowlevel.checkpoint()
    raise NotFound("no boom here")


def node(index: int) -> dict[str, Any]:
    return {"id": str(index), "name": f"n{index}", "index": index}


async def resolve_node(_root: object, _info: Any) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return node(1)


async def resolve_items(_root: object, _info: Any) -> list[dict[str, Any]]:
    await trio.lowlevel.checkpoint()
    return [node(i) for i in range(5)]


async def resolve_awaitable_items(_root: object, _info: Any) -> list[Any]:
    async def item(i: int) -> str:
        await trio.sleep(5 - i)  # later items finish first
        return f"item{i}"

    return [item(i) for i in range(4)]


async def resolve_streamed(_root: object, _info: Any) -> AsyncIterator[dict[str, Any]]:
    for i in range(3):
        await trio.lowlevel.checkpoint()
        yield node(i)


async def resolve_streamed_broken(_root: object, _info: Any) -> AsyncIterator[dict[str, Any]]:
    yield node(0)
    await trio.lowlevel.checkpoint()
    raise NotFound("stream broke")


async def resolve_endless(_root: object, info: Any) -> AsyncIterator[dict[str, Any]]:
    try:
        yield node(0)
        await trio.sleep_forever()
    finally:
        info.context.log.append("endless closed")


async def resolve_pets(_root: object, _info: Any) -> list[dict[str, Any]]:
    await trio.lowlevel.checkpoint()
    return [{"name": "Tom", "meows": True}, {"name": "Rex", "barks": True}]


def async_is_type_of(key: str) -> Any:
    async def is_type_of(value: dict[str, Any], _info: Any) -> bool:
        await trio.lowlevel.checkpoint()
        return key in value

    return is_type_of


async def resolve_forever(_root: object, _info: Any) -> str:
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def resolve_sync_required(_root: object, _info: Any) -> str:
    raise NotFound("required but missing")


async def resolve_name(source: dict[str, Any], _info: Any) -> str:
    # Items finish in reverse order; the result must still be in list order.
    await trio.sleep(10 - source["index"])
    return str(source["name"])


async def resolve_required(source: dict[str, Any], _info: Any) -> str:
    await trio.lowlevel.checkpoint()
    if source["index"] == 3:
        raise NotFound(f"node {source['id']} has nothing required")
    return "ok"


async def resolve_child(source: dict[str, Any], _info: Any) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return node(source["index"] + 1)


async def resolve_is_even(source: dict[str, Any], _info: Any) -> bool:
    await trio.lowlevel.checkpoint()
    return bool(source["index"] % 2 == 0)


def mutation(name: str) -> Any:
    async def resolve(_root: object, info: Any) -> str:
        info.context.log.append(f"{name} start")
        await trio.sleep(1)
        info.context.log.append(f"{name} end")
        return name

    return resolve


def make_schema() -> graphql.GraphQLSchema:
    schema = graphql.build_schema(SDL)
    resolvers = {
        "Query": {
            "a": resolve_a,
            "b": resolve_b,
            "c": resolve_c,
            "boom": resolve_boom,
            "strict": resolve_node,
            "node": resolve_node,
            "items": resolve_items,
            "nodes": resolve_items,
            "awaitable_items": resolve_awaitable_items,
            "streamed": resolve_streamed,
            "streamed_broken": resolve_streamed_broken,
            "forever": resolve_forever,
            "sync_required": resolve_sync_required,
            "endless": resolve_endless,
            "pets": resolve_pets,
        },
        "Mutation": {"first": mutation("first"), "second": mutation("second")},
        "Node": {
            "name": resolve_name,
            "required": resolve_required,
            "child": resolve_child,
            "is_even": resolve_is_even,
        },
    }
    for type_name, fields in resolvers.items():
        type_ = schema.type_map[type_name]
        assert isinstance(type_, graphql.GraphQLObjectType)
        for field_name, resolve in fields.items():
            type_.fields[field_name].resolve = resolve
    for type_name, key in (("Cat", "meows"), ("Dog", "barks")):
        type_ = schema.type_map[type_name]
        assert isinstance(type_, graphql.GraphQLObjectType)
        type_.is_type_of = async_is_type_of(key)
    return schema


SCHEMA = make_schema()


async def run(query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    with trio.fail_after(60):  # virtual time under autojump_clock: a deadlock fails fast
        return await execute_operation(SCHEMA, query, variables, None, Probe())


async def test_stock_executor_fails_under_trio_with_two_async_fields() -> None:
    # The reason TrioExecutor exists. Should graphql-core ever stop using asyncio,
    # this starts failing and the override can go. How the stock executor fails depends
    # on which asyncio loop policy the process has seen (trio-asyncio's, after PostgreSQL
    # tests in the same worker), so any failure counts, but not a success.
    failure: str | None = None
    with warnings.catch_warnings():
        # Its abandoned resolver coroutines are never awaited: collect them here, quietly,
        # rather than let them surface as "unraisable" in some later test.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            await graphql.execute(SCHEMA, graphql.parse("{ b c }"), context_value=Probe())
        except Exception as exc:  # any failure proves the point
            failure = type(exc).__name__
        gc.collect()
    assert failure is not None, "graphql-core's executor works under trio now: drop TrioExecutor"


async def test_sibling_root_fields_run_concurrently(autojump_clock: trio.abc.Clock) -> None:
    assert await run("{ a b c }") == {"data": {"a": "A", "b": "B", "c": "C"}}


async def test_nested_async_fields(autojump_clock: trio.abc.Clock) -> None:
    result = await run("{ node { id name is_even child { name is_even child { id name } } } }")
    assert result == {
        "data": {
            "node": {
                "id": "1",
                "name": "n1",
                "is_even": False,
                "child": {"name": "n2", "is_even": True, "child": {"id": "3", "name": "n3"}},
            }
        }
    }


async def test_list_of_objects_with_async_fields_keeps_list_order(
    autojump_clock: trio.abc.Clock,
) -> None:
    result = await run("{ nodes { id name child { name } } }")
    assert result == {
        "data": {
            "nodes": [
                {"id": str(i), "name": f"n{i}", "child": {"name": f"n{i + 1}"}} for i in range(5)
            ]
        }
    }


async def test_list_of_awaitables_keeps_list_order(autojump_clock: trio.abc.Clock) -> None:
    result = await run("{ awaitable_items }")
    assert result == {"data": {"awaitable_items": ["item0", "item1", "item2", "item3"]}}


async def test_async_iterable_list(autojump_clock: trio.abc.Clock) -> None:
    result = await run("{ streamed { id name } }")
    assert result == {"data": {"streamed": [{"id": str(i), "name": f"n{i}"} for i in range(3)]}}


async def test_async_iterable_that_breaks_nulls_the_list() -> None:
    result = await run("{ c streamed_broken { id } }")
    assert result["data"] == {"c": "C", "streamed_broken": None}
    assert [(e["path"], e["message"]) for e in result["errors"]] == [
        (["streamed_broken"], "stream broke")
    ]


async def test_one_failing_field_beside_succeeding_siblings(
    autojump_clock: trio.abc.Clock,
) -> None:
    result = await run("{ a boom b }")
    assert result == {
        "data": {"a": "A", "boom": None, "b": "B"},
        "errors": [
            {
                "message": "no boom here",
                "locations": [{"line": 1, "column": 5}],
                "path": ["boom"],
                "extensions": {"code": "not_found"},
            }
        ],
    }


async def test_failing_non_null_field_nulls_its_parent_only(
    autojump_clock: trio.abc.Clock,
) -> None:
    result = await run("{ a b strict { id child { id required child { id required } } } }")
    # node 1 -> child 2 (required ok) -> child 3 (required fails): child 3 becomes null,
    # its parent survives, and the siblings of `strict` are untouched.
    assert result["data"] == {
        "a": "A",
        "b": "B",
        "strict": {"id": "1", "child": {"id": "2", "required": "ok", "child": None}},
    }
    assert [(e["path"], e["extensions"]["code"]) for e in result["errors"]] == [
        (["strict", "child", "child", "required"], "not_found")
    ]


async def test_failing_non_null_list_item_nulls_the_list(autojump_clock: trio.abc.Clock) -> None:
    # items: [Node!] -- item 3's non-null field fails, item 3 cannot be null, so the list is.
    result = await run("{ c items { id required } nodes { id } }")
    assert result["data"] == {"c": "C", "items": None, "nodes": [{"id": str(i)} for i in range(5)]}
    assert [e["path"] for e in result["errors"]] == [["items", 3, "required"]]


async def test_nullable_list_item_failure_nulls_only_the_item(
    autojump_clock: trio.abc.Clock,
) -> None:
    result = await run("{ nodes { id required } }")
    expected = [{"id": str(i), "required": "ok"} for i in range(5)]
    expected[3] = None  # type: ignore[call-overload]
    assert result["data"] == {"nodes": expected}
    assert [e["path"] for e in result["errors"]] == [["nodes", 3, "required"]]


async def test_synchronous_non_null_failure_drops_pending_siblings_cleanly() -> None:
    # `sync_required` fails before `c` (already a coroutine) is awaited; the coroutine
    # is closed, not leaked: with warnings as errors a "never awaited" would fail here.
    result = await run("{ c node { id } sync_required }")
    assert result["data"] is None
    assert [e["path"] for e in result["errors"]] == [["sync_required"]]
    gc.collect()


async def test_mutations_run_one_after_the_other(autojump_clock: trio.abc.Clock) -> None:
    probe = Probe()
    result = await execute_operation(SCHEMA, "mutation { first second }", None, None, probe)
    assert result == {"data": {"first": "first", "second": "second"}}
    assert probe.log == ["first start", "first end", "second start", "second end"]


async def test_cancellation_from_outside_passes_through(autojump_clock: trio.abc.Clock) -> None:
    with trio.move_on_after(5) as scope:
        await execute_operation(SCHEMA, "{ c forever node { name } }", None, None, Probe())
    assert scope.cancelled_caught


async def test_cancellation_closes_an_async_iterable_source(
    autojump_clock: trio.abc.Clock,
) -> None:
    probe = Probe()
    with trio.move_on_after(5) as scope:
        await execute_operation(SCHEMA, "{ endless { id } }", None, None, probe)
    assert scope.cancelled_caught
    assert probe.log == ["endless closed"]


async def test_union_members_found_by_async_is_type_of() -> None:
    # graphql-core awaits the candidates' is_type_of checks together (async_helpers.gather).
    result = await run(
        "{ pets { __typename ... on Cat { name meows } ... on Dog { name barks } } }"
    )
    assert result == {
        "data": {
            "pets": [
                {"__typename": "Cat", "name": "Tom", "meows": True},
                {"__typename": "Dog", "name": "Rex", "barks": True},
            ]
        }
    }


async def test_gather_returns_results_in_order(autojump_clock: trio.abc.Clock) -> None:
    async def value(v: int) -> int:
        await trio.sleep(10 - v)
        return v

    assert await gather([value(i) for i in range(6)]) == list(range(6))


async def test_gather_raises_the_first_error_unwrapped_and_cancels_the_rest(
    autojump_clock: trio.abc.Clock,
) -> None:
    cancelled: list[int] = []

    async def slow(v: int) -> int:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            cancelled.append(v)
            raise
        return v

    async def fail() -> int:
        await trio.sleep(1)
        raise NotFound("first")

    with pytest.raises(NotFound, match="first"):
        await gather([slow(0), fail(), slow(2)])
    assert sorted(cancelled) == [0, 2]
    assert trio.current_time() < 100


async def test_gather_of_one_or_none() -> None:
    async def one() -> int:
        return 1

    assert await gather([one()]) == [1]
    assert await gather([]) == []


def test_executor_class_is_a_graphql_core_executor() -> None:
    assert issubclass(TrioExecutor, graphql.Executor)
