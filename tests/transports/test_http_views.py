"""Route views of the HTTP app, and the key set view, called directly (no server, no
storage)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
import trio.lowlevel
from starlette.requests import Request
from starlette.responses import Response

from bastion.core.settings import settings_from_flags
from bastion.service.context import CallerContext, Reply
from bastion.service.metrics import Metrics
from bastion.service.runtime import Runtime
from bastion.service.tokens import TokenSigner
from bastion.storage import StorageConfig, open_storage
from bastion.transports.http.app import CallerOf, HttpApp, caller_context, create_app, route_view
from bastion.transports.http.dispatch import View
from bastion.transports.http.routes import Route
from bastion.transports.rest.oauth import provider_views
from tests.keys import rsa_pem_pair
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


def _rsa_signer() -> TokenSigner:
    private, public = rsa_pem_pair()
    flags = {
        "admin-secret": "a",
        "client-id": "client-1",
        "client-secret": "s",
        "database-type": "sqlite",
        "database-url": "./x.db",
        "jwt-type": "RS256",
        "jwt-private-key": private,
        "jwt-public-key": public,
    }
    return TokenSigner(settings_from_flags(flags))


async def test_the_key_set_is_encoded_once_per_signer_and_follows_a_new_one() -> None:
    first, second = _rsa_signer(), _rsa_signer()
    made: list[TokenSigner] = []
    auth = SimpleNamespace(signer=first, policy=SimpleNamespace(issuer="https://issuer.test"))

    def counted(signer: TokenSigner) -> Any:
        def jwks() -> dict[str, Any]:
            made.append(signer)
            return TokenSigner.jwks(signer)

        return jwks

    for signer in (first, second):
        signer.jwks = counted(signer)  # type: ignore[method-assign]
    views = provider_views(SimpleNamespace(auth=auth), caller_context)  # type: ignore[arg-type]
    jwks = next(view.handler for view in views if view.path == "/.well-known/jwks.json")

    async def kids() -> list[str]:
        body = bytes((await jwks(edge_request("/jwks"))).body)
        return [key["kid"] for key in json.loads(body)["keys"]]

    assert await kids() == await kids() == [first.kid]
    auth.signer = second  # new keys come with a new signer
    assert await kids() == await kids() == [second.kid]
    assert made == [first, second]


async def test_an_instant_view_answers_and_one_that_waits_all_the_same_fails(
    tmp_path: Path,
) -> None:
    """``View.instant`` (no --request-timeout scope): a view declared so that waits is a
    bug, answered 500 before it can go on without a deadline."""
    url = f"sqlite:///{tmp_path}/views.db"
    settings = settings_from_flags(
        {
            "admin-secret": "a",
            "client-id": "client-1",
            "client-secret": "s",
            "database-type": "sqlite",
            "database-url": url,
            "jwt-type": "HS256",
            "jwt-secret": "a-test-secret-long-enough-for-hs256",
            "rate-limit-rps": "0",
        }
    )
    resumed: list[str] = []

    async def ready(_: Request) -> Response:
        return Response(b"ready")

    async def waits(_: Request) -> Response:
        await trio.lowlevel.checkpoint()
        resumed.append("waits")
        return Response(b"late")

    def views(_: CallerOf) -> list[View]:
        return [
            View("/ready", ("GET",), ready, instant=True),
            View("/waits", ("GET",), waits, instant=True),
        ]

    async with open_storage(StorageConfig(database_type="sqlite", database_url=url)) as storage:
        app = create_app(Runtime.build(settings, storage, Metrics()), [], [views])
        answers = {path: await _asgi_get(app, path) for path in ("/ready", "/waits")}
    assert answers["/ready"] == (200, b"ready")
    assert answers["/waits"][0] == 500
    assert json.loads(answers["/waits"][1])["code"] == "internal"
    assert resumed == []


async def _asgi_get(app: HttpApp, path: str) -> tuple[int, bytes]:
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])
