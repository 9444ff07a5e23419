"""Route views of the HTTP app, called directly (no server, no storage)."""

from __future__ import annotations

import json
from typing import Any

from bastion.service.context import CallerContext, Reply
from bastion.transports.http.app import route_view
from bastion.transports.http.routes import Route
from tests.transports.asgi import edge_request


async def test_a_constant_route_is_serialised_once() -> None:
    calls: list[str] = []

    async def document(_: dict[str, Any], caller: CallerContext) -> Reply:
        calls.append(caller.client_ip)
        return Reply({"openapi": "3.1.0", "paths": {"/x": {}}})

    route = Route(method="GET", path="/doc", operation=document, summary="", tag="", constant=True)
    view = route_view(route)
    bodies = []
    for _ in range(3):
        response = await view(edge_request("/doc"))
        assert response.status_code == 200
        assert response.media_type == "application/json"
        bodies.append(response.body)
    assert bodies == [b'{"openapi":"3.1.0","paths":{"/x":{}}}'] * 3
    assert calls == ["127.0.0.1"]


async def test_an_ordinary_route_runs_every_time() -> None:
    calls: list[dict[str, Any]] = []

    async def echo(request: dict[str, Any], _: CallerContext) -> Reply:
        calls.append(request)
        return Reply({"n": len(calls)})

    view = route_view(Route(method="GET", path="/echo", operation=echo, summary="", tag=""))
    assert json.loads((await view(edge_request("/echo", query=b"a=1&a=2"))).body) == {"n": 1}
    assert json.loads((await view(edge_request("/echo"))).body) == {"n": 2}
    # a repeated query parameter keeps its first value
    assert calls == [{"a": "1"}, {}]
