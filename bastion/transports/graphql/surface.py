"""POST /graphql: the GraphQL surface bound to the one service layer.

Each root field calls the service operation of the same meaning with the field's
``params`` (or ``param``) object as its request, exactly as REST passes its JSON body,
so the two surfaces validate and answer alike. Cookies an operation sets are collected
in the request context and become real ``Set-Cookie`` headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bastion.core import input_rules
from bastion.core.errors import InvalidArgument
from bastion.service.context import CallerContext, Cookie, Reply
from bastion.service.requests import WireOperation
from bastion.transports.graphql.execution import execute_operation
from bastion.transports.graphql.limits import QueryLimits
from bastion.transports.graphql.schema import Resolver, build_schema


@dataclass(slots=True)
class GraphQLContext:
    caller: CallerContext
    cookies: list[Cookie] = field(default_factory=list)


#: Root fields whose GraphQL answer is one field of the service's (REST's) body.
UNWRAPPED = {
    "webauthn_credentials": "webauthn_credentials",
    "_webauthn_credentials": "webauthn_credentials",
    "sessions": "sessions",
    "_user_sessions": "sessions",
}


def _resolver(operation: WireOperation, unwrap: str | None = None) -> Resolver:
    async def resolve(context: GraphQLContext, args: dict[str, Any]) -> Any:
        if "params" in args or "param" in args:
            request = args.get("params") or args.get("param") or {}
        else:  # plain arguments (Authorizer 2.4's webauthn_* fields) are the request
            request = args
        # Literals written in the document itself (escapes such as \u0000) arrive here.
        if (why := input_rules.refusal(request, "params")) is not None:
            raise InvalidArgument(why)
        reply = await operation(dict(request), context.caller)
        context.cookies.extend(reply.cookies)
        return reply.body if unwrap is None else reply.body[unwrap]

    return resolve


def resolvers(operations: Mapping[str, WireOperation]) -> dict[str, Resolver]:
    return {name: _resolver(op, UNWRAPPED.get(name)) for name, op in operations.items()}


class GraphQLSurface:
    def __init__(self, operations: Mapping[str, WireOperation], limits: QueryLimits) -> None:
        self.schema = build_schema(resolvers(operations))
        self.limits = limits

    async def execute(self, body: dict[str, Any], caller: CallerContext) -> Reply:
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("query is required")
        operation_name = body.get("operationName")
        if operation_name is not None and not isinstance(operation_name, str):
            raise InvalidArgument("operationName must be a string")
        context = GraphQLContext(caller)
        result = await execute_operation(
            self.schema,
            query,
            body.get("variables"),
            operation_name,
            context,
            limits=self.limits,
        )
        return Reply(result, tuple(context.cookies))
