"""OpenFGA's v1 HTTP API as a second face on the HTTP port (``--openfga-api-key``): wire
only. Paths, bodies, status codes and error bodies are OpenFGA's, so its SDKs and CLI
work against bastion; every decision is :class:`service.fga.openfga.OpenFgaService`'s."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from quart import Response, request
from quart_trio import QuartTrio

from bastion.core import errors
from bastion.service.context import CallerContext
from bastion.service.fga.openfga import OpenFgaError, OpenFgaService
from bastion.service.fga.openfga_input import as_openfga_error
from bastion.transports.http.app import json_response, read_json_object

__all__ = ["register_openfga"]

Handler = Callable[..., Awaitable[Response]]


def _error(error: OpenFgaError) -> Response:
    return json_response({"code": error.code, "message": error.message}, error.status)


def _answer(body: Any, status: int = 200) -> Response:
    return json_response(body, status)


def register_openfga(
    app: QuartTrio, fga: OpenFgaService, caller: Callable[[], CallerContext]
) -> None:
    """Mount the routes; each one checks the pre-shared key before anything else."""

    def view(rule: str, method: str, name: str, body: Handler) -> None:
        async def serve(**path: str) -> Response:
            try:
                fga.authenticate(request.headers.get("authorization", ""))
                return await body(**path)
            except OpenFgaError as exc:
                return _error(exc)
            except errors.InvalidArgument as exc:
                return _error(as_openfga_error(exc))

        app.add_url_rule(rule, endpoint=f"openfga {name}", view_func=serve, methods=[method])

    def query() -> dict[str, Any]:
        return dict(request.args.items())

    def posted(
        operation: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> Handler:
        async def run(store_id: str) -> Response:
            return _answer(await operation(store_id, await read_json_object()))

        return run

    async def create_store() -> Response:
        return _answer(await fga.create_store(await read_json_object(), caller()), 201)

    async def list_stores() -> Response:
        return _answer(await fga.list_stores(query()))

    async def get_store(store_id: str) -> Response:
        return _answer(await fga.get_store(store_id))

    async def delete_store(store_id: str) -> Response:
        await fga.delete_store(store_id, caller())
        return Response("", status=204)

    async def write_model(store_id: str) -> Response:
        body = await read_json_object()
        return _answer(await fga.write_model(store_id, body, caller()), 201)

    async def read_models(store_id: str) -> Response:
        return _answer(await fga.read_models(store_id, query()))

    async def read_model(store_id: str, model_id: str) -> Response:
        return _answer(await fga.read_model(store_id, model_id))

    async def read_changes(store_id: str) -> Response:
        return _answer(await fga.read_changes(store_id, query()))

    async def write_assertions(store_id: str, model_id: str) -> Response:
        body = await read_json_object()
        return _answer(await fga.write_assertions(store_id, model_id, body, caller()))

    async def read_assertions(store_id: str, model_id: str) -> Response:
        return _answer(await fga.read_assertions(store_id, model_id))

    async def write(store_id: str) -> Response:
        return _answer(await fga.write(store_id, await read_json_object(), caller()))

    async def streamed_list_objects(store_id: str) -> Response:
        messages = await fga.streamed_list_objects(store_id, await read_json_object())
        lines = "".join(json.dumps(m, separators=(",", ":")) + "\n" for m in messages)
        return Response(lines, status=200, content_type="application/json")

    store = "/stores/<store_id>"
    view("/stores", "POST", "create_store", create_store)
    view("/stores", "GET", "list_stores", list_stores)
    view(store, "GET", "get_store", get_store)
    view(store, "DELETE", "delete_store", delete_store)
    view(f"{store}/authorization-models", "POST", "write_model", write_model)
    view(f"{store}/authorization-models", "GET", "read_models", read_models)
    view(f"{store}/authorization-models/<model_id>", "GET", "read_model", read_model)
    view(f"{store}/changes", "GET", "read_changes", read_changes)
    view(f"{store}/assertions/<model_id>", "PUT", "write_assertions", write_assertions)
    view(f"{store}/assertions/<model_id>", "GET", "read_assertions", read_assertions)
    view(f"{store}/streamed-list-objects", "POST", "streamed", streamed_list_objects)

    view(f"{store}/write", "POST", "write", write)
    for path, operation in (
        ("read", fga.read),
        ("check", fga.check),
        ("batch-check", fga.batch_check),
        ("expand", fga.expand),
        ("list-objects", fga.list_objects),
        ("list-users", fga.list_users),
    ):
        view(f"{store}/{path}", "POST", path, posted(operation))
