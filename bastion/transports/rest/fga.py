"""REST routes of the authorization engine (spec: /v1/check_permissions, /v1/list_permissions
and the /v1/admin/fga/* table); the bodies are the service's, bare."""

from __future__ import annotations

from typing import Any

from bastion.service.fga.service import FgaService
from bastion.service.requests import bind
from bastion.transports.http.routes import Route

__all__ = ["fga_routes"]

_S = "string"
_TUPLE: dict[str, Any] = {
    "type": "object",
    "required": ["user", "relation", "object"],
    "properties": {
        "user": {"type": _S},
        "relation": {"type": _S},
        "object": {"type": _S},
        "condition": {
            "type": "object",
            "properties": {"name": {"type": _S}, "context": {"type": "object"}},
        },
    },
}
_TUPLES = {"type": "array", "items": _TUPLE, "minItems": 1, "maxItems": 100}
#: the body of a tuple write or delete
_TUPLES_BODY = {"type": "object", "required": ["tuples"], "properties": {"tuples": _TUPLES}}
_MESSAGE = {"type": "object", "properties": {"message": {"type": _S}}}
_MODEL = {"type": "object", "properties": {"id": {"type": _S}, "dsl": {"type": _S}}}


def _strings(*names: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": _S} for name in names},
    }
    if required:
        schema["required"] = list(required)
    return schema


def fga_routes(fga: FgaService) -> list[Route]:
    admin: dict[str, Any] = {"tag": "admin", "extra_statuses": (401,)}
    public: dict[str, Any] = {"tag": "authorization", "extra_statuses": (401,)}
    check = {
        "type": "object",
        "required": ["relation", "object"],
        "properties": {
            "relation": {"type": _S},
            "object": {"type": _S},
            "contextual_tuples": {"type": "array", "items": _TUPLE, "maxItems": 100},
            "context": {"type": "object"},
        },
    }
    return [
        Route(
            method="POST",
            path="/v1/check_permissions",
            operation=bind(fga.check_permissions),
            summary="Evaluate 1 to 100 permission checks for the caller (or, for a "
            "super-admin, an explicit user)",
            request_schema={
                "type": "object",
                "required": ["checks"],
                "properties": {
                    "checks": {"type": "array", "items": check, "minItems": 1, "maxItems": 100},
                    "user": {"type": _S},
                },
            },
            response_schema={
                "type": "object",
                "properties": {
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "relation": {"type": _S},
                                "object": {"type": _S},
                                "allowed": {"type": "boolean"},
                                "error": {
                                    "type": "object",
                                    "properties": {
                                        "code": {"type": _S},
                                        "message": {"type": _S},
                                    },
                                },
                            },
                        },
                    }
                },
            },
            **public,
        ),
        Route(
            method="POST",
            path="/v1/list_permissions",
            operation=bind(fga.list_permissions),
            summary="List the objects the subject holds relations on (at most 1000 entries)",
            request_schema={
                "type": "object",
                "properties": {
                    **_strings("relation", "object_type", "user")["properties"],
                    "context": {"type": "object"},
                    "contextual_tuples": {"type": "array", "items": _TUPLE, "maxItems": 100},
                },
            },
            response_schema={
                "type": "object",
                "properties": {
                    "objects": {"type": "array", "items": {"type": _S}},
                    "permissions": {"type": "array", "items": _strings("object", "relation")},
                    "truncated": {"type": "boolean"},
                },
            },
            **public,
        ),
        Route(
            method="GET",
            path="/v1/admin/fga/model",
            operation=bind(fga.get_model),
            summary="The current authorization model (empty when none)",
            response_schema=_MODEL,
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/model",
            operation=bind(fga.write_model),
            summary="Install a new authorization model version",
            request_schema=_strings("dsl", required=("dsl",)),
            response_schema=_MODEL,
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/tuples",
            operation=bind(fga.write_tuples),
            summary="Write relationship tuples (all or none)",
            request_schema=_TUPLES_BODY,
            response_schema=_MESSAGE,
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/tuples/delete",
            operation=bind(fga.delete_tuples),
            summary="Delete relationship tuples (all or none)",
            request_schema=_TUPLES_BODY,
            response_schema=_MESSAGE,
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/tuples/read",
            operation=bind(fga.read_tuples),
            summary="Read relationship tuples, filtered and paged",
            request_schema={
                "type": "object",
                "properties": {
                    "user": {"type": _S},
                    "relation": {"type": _S},
                    "object": {"type": _S},
                    "page_size": {"type": "integer"},
                    "continuation_token": {"type": _S},
                },
            },
            response_schema={
                "type": "object",
                "properties": {
                    "tuples": {"type": "array", "items": _TUPLE},
                    "continuation_token": {"type": _S},
                },
            },
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/list_users",
            operation=bind(fga.list_users),
            summary="Users holding a relation on an object",
            request_schema={
                **_strings(
                    "object", "relation", "user_type", required=("object", "relation", "user_type")
                ),
                "properties": {
                    **_strings("object", "relation", "user_type")["properties"],
                    "context": {"type": "object"},
                    "contextual_tuples": {"type": "array", "items": _TUPLE, "maxItems": 100},
                },
            },
            response_schema={
                "type": "object",
                "properties": {"users": {"type": "array", "items": {"type": _S}}},
            },
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/expand",
            operation=bind(fga.expand),
            summary="One level of the userset tree of object#relation, as a JSON string",
            request_schema=_strings("relation", "object", required=("relation", "object")),
            response_schema=_strings("tree"),
            **admin,
        ),
        Route(
            method="POST",
            path="/v1/admin/fga/reset",
            operation=bind(fga.reset),
            summary="Delete every model version (refused while tuples exist); audited",
            request_schema={"type": "object"},
            response_schema=_MESSAGE,
            **admin,
        ),
    ]
