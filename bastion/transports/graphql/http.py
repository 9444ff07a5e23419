"""GraphQL over HTTP: ``POST /graphql`` as a route of the HTTP server, with the refusals
Authorizer gives before running anything."""

from __future__ import annotations

import contextlib
import hmac
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.core.settings import Settings
from bastion.service import tracing
from bastion.service.context import CallerContext, Reply
from bastion.service.runtime import Runtime
from bastion.transports.graphql.limits import QueryLimits, check_body_size
from bastion.transports.graphql.operations import root_operations
from bastion.transports.graphql.surface import GraphQLSurface
from bastion.transports.http.routes import Route
from bastion.transports.http.wire import json_response

__all__ = ["graphql_limits", "graphql_route"]


def graphql_limits(settings: Settings) -> QueryLimits:
    """``--graphql-max-*`` and ``--enable-graphql-introspection``."""
    return QueryLimits(
        max_depth=settings.graphql_max_depth,
        max_aliases=settings.graphql_max_aliases,
        max_complexity=settings.graphql_max_complexity,
        max_body_bytes=settings.graphql_max_body_bytes,
        introspection=settings.enable_graphql_introspection,
    )


async def _refusal(request: Request, settings: Settings) -> Response | None:
    """What ``/graphql`` refuses before running anything, in Authorizer's shapes: a client
    id header naming another application (reference §2), a declared body over the limit."""
    # Empty counts as absent (Authorizer reads it with Go's Header.Get): authorizer-js
    # sends an empty one when configured without a client id.
    claimed = request.headers.get("x-authorizer-client-id")
    if claimed and not hmac.compare_digest(claimed.encode(), settings.client_id.encode()):
        return json_response(
            {"error": "invalid_client_id", "error_description": "The client id is invalid"}, 400
        )
    declared = request.headers.get("content-length", "")
    size = int(declared) if declared.isdigit() else None
    too_big = None if size is None else check_body_size(size, graphql_limits(settings))
    if too_big is None:
        return None
    # Drain what the client is sending (at most the app's ceiling; beyond it the
    # connection closes), or it may block writing and never read the answer.
    with contextlib.suppress(errors.PayloadTooLarge):
        async for _ in request.stream():
            pass
    return json_response({"data": None, "errors": [too_big.formatted]}, 413)


def graphql_route(runtime: Runtime) -> Route:
    settings = runtime.settings
    surface = GraphQLSurface(root_operations(runtime), graphql_limits(settings))

    async def graphql(body: dict[str, Any], caller: CallerContext) -> Reply:
        name = body.get("operationName")
        facts = {"graphql.operation.name": name} if isinstance(name, str) and name else None
        with tracing.span("graphql", facts):
            return await surface.execute(body, caller)

    async def refusal(request: Request) -> Response | None:
        return await _refusal(request, settings)

    return Route(
        method="POST",
        path="/graphql",
        operation=graphql,
        summary="GraphQL (Authorizer 2.3 schema); errors come back in the body with HTTP 200",
        tag="graphql",
        request_schema={
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string"},
                "variables": {"type": "object"},
                "operationName": {"type": "string"},
            },
        },
        body_limit=settings.graphql_max_body_bytes,
        guard=refusal,
    )
