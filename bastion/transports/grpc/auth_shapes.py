"""Where Authorizer's protobuf messages shape authentication replies differently.

``app_data`` (a user's) and ``claims`` (validate_jwt_token's) are ``AppData`` wrappers,
``{value: {...}}``, in the gRPC messages and plain maps in REST and GraphQL (reference
§13 item 11). Requests need no adapter: ``service.requests.mapping`` reads both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bastion.service.context import CallerContext, Reply
from bastion.service.requests import WireOperation as Operation

__all__ = ["grpc_shaped"]


def _user(user: Any) -> Any:
    if not isinstance(user, dict):
        return user
    return {**user, "app_data": {"value": user.get("app_data") or {}}}


def _shaped(body: dict[str, Any]) -> dict[str, Any]:
    shaped = dict(body)
    if "app_data" in shaped and "id" in shaped:  # a bare User (profile)
        shaped = _user(shaped)
    if "user" in shaped:
        shaped["user"] = _user(shaped["user"])
    if isinstance(shaped.get("claims"), dict):
        shaped["claims"] = {"value": shaped["claims"]}
    return shaped


def grpc_shaped(operation: Operation) -> Operation:
    async def call(request: Mapping[str, Any], caller: CallerContext) -> Reply:
        reply = await operation(request, caller)
        return Reply(_shaped(reply.body), reply.cookies)

    return call
