"""Route views of the HTTP app, on a bare quart-trio app (no server, no storage)."""

from __future__ import annotations

from typing import Any

from quart import g
from quart_trio import QuartTrio

from bastion.service.context import CallerContext, Reply
from bastion.transports.http.app import route_view
from bastion.transports.http.routes import Route


def _app(route: Route) -> QuartTrio:
    app = QuartTrio("views-test")

    @app.before_request
    async def peer() -> None:
        g.client_ip = "127.0.0.1"

    app.add_url_rule(route.path, endpoint=route.path, view_func=route_view(route))
    return app


async def test_a_constant_route_is_serialised_once() -> None:
    calls: list[str] = []

    async def document(_: dict[str, Any], caller: CallerContext) -> Reply:
        calls.append(caller.client_ip)
        return Reply({"openapi": "3.1.0", "paths": {"/x": {}}})

    route = Route(method="GET", path="/doc", operation=document, summary="", tag="", constant=True)
    client = _app(route).test_client()
    bodies = []
    for _ in range(3):
        response = await client.get("/doc")
        assert response.status_code == 200
        assert response.content_type == "application/json"
        bodies.append(await response.get_data())
    assert bodies == [b'{"openapi":"3.1.0","paths":{"/x":{}}}'] * 3
    assert calls == ["127.0.0.1"]


async def test_an_ordinary_route_runs_every_time() -> None:
    calls: list[dict[str, Any]] = []

    async def echo(request: dict[str, Any], _: CallerContext) -> Reply:
        calls.append(request)
        return Reply({"n": len(calls)})

    client = _app(
        Route(method="GET", path="/echo", operation=echo, summary="", tag="")
    ).test_client()
    assert await (await client.get("/echo?a=1")).get_json() == {"n": 1}
    assert await (await client.get("/echo")).get_json() == {"n": 2}
    assert calls == [{"a": "1"}, {}]
