"""Calling an HTTP endpoint of bastion's application directly, without a server: a
Starlette request as the edge leaves it (client address and request id known)."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import Response

from bastion.transports.http.app import EdgeState
from bastion.transports.http.dispatch import Dispatcher, Endpoint, View


def edge_request(
    path: str, *, method: str = "GET", query: bytes = b"", body: bytes = b""
) -> Request:
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": [(b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 40000),
        "bastion.edge": EdgeState(client_ip="127.0.0.1", request_id="test"),
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(scope, receive)


async def call_view(views: Iterable[View], path: str, *, method: str = "GET") -> Response:
    """Route ``path`` among ``views`` as the application does, and answer it."""
    dispatcher = Dispatcher()
    for view in views:
        dispatcher.add(view.path, view.methods, Endpoint(view.handler, view.path))
    match = dispatcher.match(method, path)
    assert match is not None, f"{path} is not served"
    assert match.endpoint is not None, f"{method} {path} is not served"
    request = edge_request(path, method=method)
    request.scope["path_params"] = match.params
    return await match.endpoint.handler(request)
