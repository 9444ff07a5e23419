"""OpenFGA's v1 HTTP API as a second face on the HTTP port (``--openfga-api-key``): wire
only. Paths, bodies, status codes and error bodies are OpenFGA's, so its SDKs and CLI
work against bastion; every decision is :class:`service.fga.openfga.OpenFgaService`'s."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bastion.core import errors
from bastion.service.fga.openfga import OpenFgaError, OpenFgaService
from bastion.service.fga.openfga_input import as_openfga_error
from bastion.transports.http.app import CallerOf
from bastion.transports.http.dispatch import View
from bastion.transports.http.wire import json_response, query_values, read_json_object

__all__ = ["openfga_views"]

Handler = Callable[..., Awaitable[Response]]


def _error(error: OpenFgaError) -> Response:
    return json_response({"code": error.code, "message": error.message}, error.status)


def _answer(body: Any, status: int = 200) -> Response:
    return json_response(body, status)


def openfga_views(fga: OpenFgaService, caller_of: CallerOf) -> list[View]:
    """The routes; each one checks the pre-shared key before anything else. A handler
    gets the request and the path's parameters by name."""
    views: list[View] = []

    def view(rule: str, method: str, body: Handler) -> None:
        async def serve(request: Request) -> Response:
            try:
                fga.authenticate(request.headers.get("authorization", ""))
                return await body(request, **request.path_params)
            except OpenFgaError as exc:
                return _error(exc)
            except errors.InvalidArgument as exc:
                return _error(as_openfga_error(exc))

        views.append(View(rule, (method,), serve))

    def posted(
        operation: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> Handler:
        async def run(request: Request, store_id: str) -> Response:
            return _answer(await operation(store_id, await read_json_object(request)))

        return run

    async def create_store(request: Request) -> Response:
        body = await read_json_object(request)
        return _answer(await fga.create_store(body, caller_of(request)), 201)

    async def list_stores(request: Request) -> Response:
        return _answer(await fga.list_stores(query_values(request)))

    async def get_store(_: Request, store_id: str) -> Response:
        return _answer(await fga.get_store(store_id))

    async def delete_store(request: Request, store_id: str) -> Response:
        await fga.delete_store(store_id, caller_of(request))
        return Response(status_code=204)

    async def write_model(request: Request, store_id: str) -> Response:
        body = await read_json_object(request)
        return _answer(await fga.write_model(store_id, body, caller_of(request)), 201)

    async def read_models(request: Request, store_id: str) -> Response:
        return _answer(await fga.read_models(store_id, query_values(request)))

    async def read_model(_: Request, store_id: str, model_id: str) -> Response:
        return _answer(await fga.read_model(store_id, model_id))

    async def read_changes(request: Request, store_id: str) -> Response:
        return _answer(await fga.read_changes(store_id, query_values(request)))

    async def write_assertions(request: Request, store_id: str, model_id: str) -> Response:
        body = await read_json_object(request)
        return _answer(await fga.write_assertions(store_id, model_id, body, caller_of(request)))

    async def read_assertions(_: Request, store_id: str, model_id: str) -> Response:
        return _answer(await fga.read_assertions(store_id, model_id))

    async def write(request: Request, store_id: str) -> Response:
        body = await read_json_object(request)
        return _answer(await fga.write(store_id, body, caller_of(request)))

    async def streamed_list_objects(request: Request, store_id: str) -> Response:
        messages = await fga.streamed_list_objects(store_id, await read_json_object(request))

        async def lines() -> AsyncIterator[bytes]:
            async for message in messages:
                yield (json.dumps(message, separators=(",", ":")) + "\n").encode()

        # Each message is sent as it comes (chunked): the objects as they are found.
        return StreamingResponse(lines(), media_type="application/json")

    store = "/stores/{store_id}"
    view("/stores", "POST", create_store)
    view("/stores", "GET", list_stores)
    view(store, "GET", get_store)
    view(store, "DELETE", delete_store)
    view(f"{store}/authorization-models", "POST", write_model)
    view(f"{store}/authorization-models", "GET", read_models)
    view(f"{store}/authorization-models/{{model_id}}", "GET", read_model)
    view(f"{store}/changes", "GET", read_changes)
    view(f"{store}/assertions/{{model_id}}", "PUT", write_assertions)
    view(f"{store}/assertions/{{model_id}}", "GET", read_assertions)
    view(f"{store}/streamed-list-objects", "POST", streamed_list_objects)

    view(f"{store}/write", "POST", write)
    for path, operation in (
        ("read", fga.read),
        ("check", fga.check),
        ("batch-check", fga.batch_check),
        ("expand", fga.expand),
        ("list-objects", fga.list_objects),
        ("list-users", fga.list_users),
    ):
        view(f"{store}/{path}", "POST", posted(operation))
    return views
