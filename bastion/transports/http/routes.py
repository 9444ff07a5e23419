"""The HTTP route table: the single source for serving requests and for /openapi.json."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from bastion.service.context import CallerContext, Reply

JsonObject = dict[str, Any]
Operation = Callable[[JsonObject, CallerContext], Awaitable[Reply]]
#: Runs before the route reads its body, after the edge's checks, given the request: an
#: answer (a response) refuses the request there and then; None lets it through.
Guard = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    method: str
    path: str
    operation: Operation
    summary: str
    tag: str
    #: JSON Schema of the request body (POST) or None for no body.
    request_schema: JsonObject | None = None
    #: JSON Schema of the 200 response body.
    response_schema: JsonObject = field(default_factory=lambda: {"type": "object"})
    #: Exempt from the per-IP rate limit (health probes, discovery documents).
    rate_limit_exempt: bool = False
    #: Status codes the route answers with JSON (the success code is 200).
    extra_statuses: tuple[int, ...] = ()
    #: The answer never changes (a GET without cookies): serialised once, then served as is.
    constant: bool = False
    #: Largest body this route reads (None: the server-wide ceiling).
    body_limit: int | None = None
    guard: Guard | None = None


ERROR_SCHEMA: JsonObject = {
    "type": "object",
    "required": ["code", "message"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
}


def openapi_document(
    routes: list[Route], *, title: str, version: str, server_url: str
) -> JsonObject:
    """OpenAPI 3.1 for exactly the routes that are served."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        responses: dict[str, Any] = {
            "200": {
                "description": "Success",
                "content": {"application/json": {"schema": route.response_schema}},
            }
        }
        for status in (*route.extra_statuses, 400, 403, 429):
            responses.setdefault(
                str(status),
                {
                    "description": "Error",
                    "content": {"application/json": {"schema": ERROR_SCHEMA}},
                },
            )
        operation: dict[str, Any] = {
            "summary": route.summary,
            "tags": [route.tag],
            "operationId": route.method.lower() + "_" + route.path.strip("/").replace("/", "_"),
            "responses": responses,
        }
        if route.request_schema is not None:
            operation["requestBody"] = {
                "required": False,
                "content": {"application/json": {"schema": route.request_schema}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "servers": [{"url": server_url}],
        "paths": paths,
        "components": {"schemas": {"Error": ERROR_SCHEMA}},
    }


_PARAMETER = re.compile(r"\{([A-Za-z_]\w*)(?::\w+)?\}")


def view_paths(
    rules: Iterable[tuple[str, Collection[str]]], documented: Collection[str]
) -> dict[str, dict[str, Any]]:
    """OpenAPI path items for the views that are not JSON routes (OAuth/OIDC, pages, social
    sign-in, the emailed-link landings): ``rules`` are (path, methods) as served, in
    Starlette's path syntax. Their
    answers are pages, redirects or JSON, so any status is documented; a form or JSON body
    is accepted where a POST reads one."""
    paths: dict[str, dict[str, Any]] = {}
    for rule, methods in rules:
        path = _PARAMETER.sub(r"{\1}", rule)
        if path in documented:
            continue
        names = _PARAMETER.findall(rule)
        for method in sorted(set(methods) - {"HEAD", "OPTIONS"}):
            operation: dict[str, Any] = {
                "summary": f"{method} {path}",
                "tags": ["views"],
                "operationId": method.lower() + "_" + re.sub(r"\W+", "_", path.strip("/")),
                "responses": {"default": {"description": "A page, a redirect or JSON"}},
            }
            if names:
                operation["parameters"] = [
                    {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                    for n in names
                ]
            if method == "POST":
                body = {"schema": {"type": "object"}}
                operation["requestBody"] = {
                    "required": False,
                    "content": {"application/x-www-form-urlencoded": body},
                }
            paths.setdefault(path, {})[method.lower()] = operation
    return paths
