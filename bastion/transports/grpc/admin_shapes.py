"""Where Authorizer's protobuf messages shape admin data differently from REST.

Maps (webhook ``headers``, user ``app_data``) are ``AppData`` wrappers, ``{value: {...}}``,
in the gRPC messages and plain objects in REST and GraphQL (reference §13 item 11);
``InviteMembersResponse`` names its list ``users`` where GraphQL says ``Users``. These
adapters sit between the gRPC table and the service operations, so the service sees and
returns one shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bastion.service.context import CallerContext, Reply
from bastion.service.requests import WireOperation as Operation

__all__ = ["renamed", "unwrapped", "wrapped"]


def unwrapped(operation: Operation, field: str) -> Operation:
    """``field: {value: {...}}`` in the request becomes ``field: {...}``."""

    async def call(request: Mapping[str, Any], caller: CallerContext) -> Reply:
        value = request.get(field)
        if isinstance(value, dict):
            request = {**request, field: value.get("value", {})}
        return await operation(request, caller)

    return call


def _wrap(item: dict[str, Any], field: str) -> dict[str, Any]:
    return {**item, field: {"value": item.get(field) or {}}}


def wrapped(operation: Operation, field: str, *, within: str | None = None) -> Operation:
    """The reply's ``field`` (or, ``within`` a list, each item's) becomes ``{value: ...}``."""

    async def call(request: Mapping[str, Any], caller: CallerContext) -> Reply:
        reply = await operation(request, caller)
        if within is None:
            body = _wrap(reply.body, field)
        else:
            body = {**reply.body, within: [_wrap(i, field) for i in reply.body[within]]}
        return Reply(body, reply.cookies)

    return call


def renamed(operation: Operation, old: str, new: str) -> Operation:
    async def call(request: Mapping[str, Any], caller: CallerContext) -> Reply:
        reply = await operation(request, caller)
        body = {new if key == old else key: value for key, value in reply.body.items()}
        return Reply(body, reply.cookies)

    return call
