"""Depth, alias, complexity and size limits, and the introspection switch.

Each limit is refused one past its boundary with Authorizer's exact message and
accepted at the boundary itself.
"""

from __future__ import annotations

from typing import Any

import graphql
import pytest

from bastion.core.errors import PayloadTooLarge
from bastion.transports.graphql import QueryLimits, build_schema, execute_operation
from bastion.transports.graphql.limits import check_operation_limits

# A recursive type makes any depth expressible; nothing here needs resolvers.
NODE_SCHEMA = graphql.build_schema(
    "type Query { node: Node } type Node { id: ID child: Node name: String }"
)
AUTHORIZER = build_schema()


DEFAULTS = QueryLimits()


async def run(
    query: str, limits: QueryLimits = DEFAULTS, schema: graphql.GraphQLSchema = NODE_SCHEMA
) -> dict[str, Any]:
    return await execute_operation(schema, query, None, None, None, limits=limits)


def nested(depth: int) -> str:
    """A query of exactly ``depth`` levels: node, child x (depth - 2), id."""
    return "{ node { " + "child { " * (depth - 2) + "id" + " }" * (depth - 1) + " }"


def refused(result: dict[str, Any], message: str, code: str = "invalid_argument") -> bool:
    return result == {"data": None, "errors": [{"message": message, "extensions": {"code": code}}]}


async def test_depth_at_the_limit_runs() -> None:
    assert (await run(nested(15)))["data"] == {"node": None}


async def test_depth_over_the_limit_is_refused() -> None:
    result = await run(nested(16))
    assert refused(result, "query depth 16 exceeds maximum allowed depth 15")


async def test_depth_is_configurable() -> None:
    limits = QueryLimits(max_depth=3)
    assert (await run(nested(3), limits))["data"] == {"node": None}
    assert refused(await run(nested(4), limits), "query depth 4 exceeds maximum allowed depth 3")


async def test_fragments_add_no_depth_of_their_own() -> None:
    query = "{ node { ...F } } fragment F on Node { ... on Node { child { id } } }"
    assert refused(
        await run(query, QueryLimits(max_depth=2)),
        "query depth 3 exceeds maximum allowed depth 2",
    )
    assert (await run(query, QueryLimits(max_depth=3)))["data"] == {"node": None}


def aliased(count: int) -> str:
    return "{ " + " ".join(f"m{i}: meta {{ version }}" for i in range(count)) + " }"


async def test_aliases_at_the_limit_pass() -> None:
    result = await run(aliased(30), schema=AUTHORIZER)
    # Past the limits: meta has no resolver bound in this schema.
    assert result["errors"][0]["message"] == "not implemented in this build"


async def test_aliases_over_the_limit_are_refused() -> None:
    result = await run(aliased(31), schema=AUTHORIZER)
    assert refused(result, "query uses 31 aliases, exceeds maximum 30")


async def test_an_alias_equal_to_the_field_name_is_not_counted() -> None:
    query = "{ node: node { id: id a: id } }"
    assert (await run(query, QueryLimits(max_aliases=1)))["data"] == {"node": None}
    assert refused(
        await run("{ x: node { a: id } }", QueryLimits(max_aliases=1)),
        "query uses 2 aliases, exceeds maximum 1",
    )


async def test_aliases_inside_fragments_count() -> None:
    query = "{ node { ...F ...F } } fragment F on Node { a: id }"
    assert refused(
        await run(query, QueryLimits(max_aliases=1)), "query uses 2 aliases, exceeds maximum 1"
    )


def wide(fields: int) -> str:
    """Complexity 1 (node) + ``fields`` (each repeated ``id`` costs 1)."""
    return "{ node { " + "id " * fields + "} }"


async def test_complexity_at_the_limit_runs() -> None:
    assert (await run(wide(299)))["data"] == {"node": None}


async def test_complexity_over_the_limit_is_refused() -> None:
    result = await run(wide(300))
    assert refused(result, "operation has complexity 301, which exceeds the limit of 300")


async def test_complexity_counts_nested_selections_and_each_spread() -> None:
    # node(1) + child(1 + id 1 + name 1) + spread twice of F (id 1) = 6
    query = "{ node { child { id name } ...F ...F } } fragment F on Node { id }"
    assert refused(
        await run(query, QueryLimits(max_complexity=5)),
        "operation has complexity 6, which exceeds the limit of 5",
    )
    assert (await run(query, QueryLimits(max_complexity=6)))["data"] == {"node": None}


async def test_schema_introspection_is_free_of_complexity() -> None:
    result = await run(graphql.get_introspection_query(), schema=AUTHORIZER)
    assert "errors" not in result
    assert result["data"]["__schema"]["queryType"]["name"] == "Query"


async def test_depth_is_checked_before_aliases_and_complexity() -> None:
    limits = QueryLimits(max_depth=2, max_aliases=1, max_complexity=1)
    result = await run("{ a: node { b: child { id } } }", limits)
    assert refused(result, "query depth 3 exceeds maximum allowed depth 2")
    result = await run("{ a: node { b: id } }", limits)
    assert refused(result, "query uses 2 aliases, exceeds maximum 1")


async def test_fragment_bombs_are_measured_without_expanding_them() -> None:
    # 2**40 fields once expanded; measured per fragment, it is refused at once.
    fragments = ["fragment F0 on Node { id }"] + [
        f"fragment F{i} on Node {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, 41)
    ]
    query = "{ node { ...F40 } } " + " ".join(fragments)
    result = await run(query)
    assert refused(result, f"operation has complexity {1 + 2**40}, which exceeds the limit of 300")


async def test_limits_measure_the_selected_operation() -> None:
    document = graphql.parse(f"query Deep {nested(16)} query Flat {{ node {{ id }} }}")
    limits = QueryLimits()
    assert check_operation_limits(document, "Flat", limits) is None
    error = check_operation_limits(document, "Deep", limits)
    assert error is not None
    assert error.message == "query depth 16 exceeds maximum allowed depth 15"


async def test_cyclic_fragments_are_left_to_validation() -> None:
    result = await run("{ node { ...A } } fragment A on Node { ...B } fragment B on Node { ...A }")
    assert result["data"] is None
    assert result["errors"][0]["message"].startswith("Cannot spread fragment 'A' within itself")


async def test_query_text_over_the_body_limit_is_refused() -> None:
    limits = QueryLimits(max_body_bytes=64)
    query = "{ node { id } }"
    padded = query + " " * (64 - len(query))
    assert (await run(padded, limits))["data"] == {"node": None}
    assert refused(
        await run(padded + " ", limits),
        "request body of 65 bytes exceeds maximum of 64 bytes",
        PayloadTooLarge.code,
    )


@pytest.mark.parametrize("name", ["max_depth", "max_aliases", "max_complexity", "max_body_bytes"])
def test_limits_must_be_positive(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        QueryLimits(**{name: 0})


NO_INTROSPECTION = QueryLimits(introspection=False)


@pytest.mark.parametrize(
    "query",
    [
        "{ __schema { queryType { name } } }",
        '{ __type(name: "User") { name } }',
        "query { ...I } fragment I on Query { __schema { types { name } } }",
    ],
)
async def test_introspection_off_refuses_schema_and_type(query: str) -> None:
    result = await run(query, NO_INTROSPECTION, AUTHORIZER)
    assert result["data"] is None
    assert [(e["message"], e["extensions"]["code"]) for e in result["errors"]] == [
        ("introspection disabled", "failed_precondition")
    ]


async def test_introspection_off_still_allows_typename() -> None:
    result = await run("{ __typename }", NO_INTROSPECTION, AUTHORIZER)
    assert result == {"data": {"__typename": "Query"}}


async def test_introspection_off_hides_suggestions() -> None:
    result = await run("{ metaa { version } }", NO_INTROSPECTION, AUTHORIZER)
    assert [e["message"] for e in result["errors"]] == [
        "Cannot query field 'metaa' on type 'Query'."
    ]
    result = await run("{ metaa { version } }", QueryLimits(), AUTHORIZER)
    assert "Did you mean 'meta'?" in result["errors"][0]["message"]


async def test_introspection_on_answers() -> None:
    result = await run(
        '{ __type(name: "InviteMembersResponse") { fields { name } } }', schema=AUTHORIZER
    )
    assert result == {"data": {"__type": {"fields": [{"name": "message"}, {"name": "Users"}]}}}
