"""The HTTP application (ASGI, Starlette's requests and responses): the edge in front of
the routes and views it is given.

Order of the edge, for every request: client address (``--trusted-proxies``) -> CORS
preflight -> per-IP rate limit -> CSRF -> route. Every response, errors included, gets
the security headers, CORS headers for an allowed origin, and a metrics sample.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from bastion.core import errors, input_rules, log_context
from bastion.core.networks import client_ip
from bastion.core.out_of_scope import OUT_OF_SCOPE_MESSAGE, is_out_of_scope
from bastion.service import tracing
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.runtime import Runtime
from bastion.storage import StorageUnavailable
from bastion.storage.deadline import RequestDeadline, overrun
from bastion.transports.http import edge
from bastion.transports.http.body import BodyReceiver
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.dispatch import Dispatcher, Endpoint, Handler, Match, View
from bastion.transports.http.routes import Route, openapi_document, view_paths
from bastion.transports.http.wire import (
    error_response,
    json_response,
    query_values,
    read_json_object,
)

__all__ = [
    "MAX_BODY_BYTES",
    "CallerOf",
    "HttpApp",
    "ViewRegistrar",
    "caller_context",
    "create_app",
    "route_view",
]

log = logging.getLogger("bastion.http")
#: One line per request at info level: method, path (never the query: it may carry a
#: token), status, duration, client address, request id.
access_log = logging.getLogger("bastion.access")

#: Largest request body accepted on any route.
MAX_BODY_BYTES = 1024 * 1024
#: How long an unread request body is waited for once the answer is known.
BODY_SECONDS = 30.0
_EDGE = "bastion.edge"
_HTTP1 = ("1.1", "1.0")

#: How a view reads the caller of its request.
CallerOf = Callable[[Request], CallerContext]
#: Gives the views that are not JSON-in/JSON-out (redirects, forms, pages, OpenFGA's API).
ViewRegistrar = Callable[[CallerOf], Iterable[View]]

#: Health routes answer a storage failure in their own shape, naming the store.
_HEALTH_PATHS = frozenset({"/readyz"})
_PREFLIGHT = {
    "Access-Control-Allow-Methods": edge.CORS_ALLOW_METHODS,
    "Access-Control-Allow-Headers": edge.CORS_ALLOW_HEADERS,
    "Access-Control-Max-Age": "600",
}


@dataclass(frozen=True, slots=True)
class EdgeState:
    """What the edge learnt of a request before any endpoint ran."""

    client_ip: str
    request_id: str


def caller_context(request: Request) -> CallerContext:
    headers = _first_values(request.scope["headers"], _CALLER_HEADERS)
    auth = headers.get("authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    return CallerContext(
        client_ip=request.scope[_EDGE].client_ip,
        user_agent=headers.get("user-agent", ""),
        bearer_token=bearer or None,
        cookies=request.cookies,
        admin_secret_header=headers.get("x-service-admin-secret")
        or headers.get("x-authorizer-admin-secret"),
        client_id_header=headers.get("x-authorizer-client-id"),
        protocol=Protocol.GRAPHQL if request.scope["path"] == "/graphql" else Protocol.REST,
    )


class HttpApp:
    """The ASGI application both HTTP servers host."""

    def __init__(self, runtime: Runtime, dispatcher: Dispatcher, *, request_timeout: float) -> None:
        self.runtime = runtime
        self.dispatcher = dispatcher
        self.request_timeout = request_timeout
        settings = runtime.settings
        self.security = [
            (name.lower().encode(), value.encode())
            for name, value in edge.security_headers(
                csp=not settings.disable_csp, hsts=settings.enable_hsts
            ).items()
        ]
        self._samples: dict[tuple[str, str, int], _Sample] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        headers = _first_values(scope["headers"], _EDGE_HEADERS)
        peer = (scope.get("client") or ("unknown", 0))[0]
        state = EdgeState(
            client_ip(
                peer,
                _all_values(scope["headers"], b"x-forwarded-for"),
                self.runtime.trusted_proxies,
            ),
            edge.request_id(headers.get("x-request-id")),
        )
        scope[_EDGE] = state
        logged_as = log_context.request_id.set(state.request_id)
        method = scope["method"]
        traced = tracing.request_span(method, headers.get("traceparent"), headers.get("tracestate"))
        try:
            with traced as span:
                body = BodyReceiver(receive, MAX_BODY_BYTES, _declared_length(scope, headers))
                request = Request(scope, body)
                match = self.dispatcher.match(method, scope["path"])
                try:
                    response = await self._answer(request, match, body, state)
                except Exception as exc:  # every failure gets an answer in the API's envelope
                    response = _failure(exc, scope["path"])
                endpoint = match.endpoint if match is not None else None
                origin = headers.get("origin")
                await self._edge_out(request, response, body, state, endpoint, started, origin)
                if span is not None and span.is_recording():
                    _describe(span, method, endpoint, scope["path"], response.status_code)
                await response(scope, body, send)
        finally:
            log_context.request_id.reset(logged_as)

    async def _answer(
        self, request: Request, match: Match | None, body: BodyReceiver, state: EdgeState
    ) -> Response:
        method, path = request.scope["method"], request.scope["path"]
        if method == "OPTIONS":
            return Response(status_code=204, headers=_PREFLIGHT)
        endpoint = match.endpoint if match is not None else None
        route = endpoint.route if endpoint is not None else None
        # Discovery documents are fetched by every relying party and cached; never limit them.
        if not (route is not None and route.rate_limit_exempt) and not path.startswith(
            "/.well-known/"
        ):
            await self.runtime.rate_limiter.check(state.client_ip, surface="http")
        refusal = edge.csrf_refusal(method, path, request.headers, self.runtime.origins)
        if refusal is not None:
            raise errors.PermissionDenied(refusal)
        if match is None:
            admin_operation = path.removeprefix("/v1/admin/")
            if admin_operation != path and is_out_of_scope(admin_operation):
                raise errors.Unimplemented(OUT_OF_SCOPE_MESSAGE)
            raise errors.NotFound("not found")
        if endpoint is None:
            response = error_response(errors.MethodNotAllowed("method not allowed"))
            response.headers["Allow"] = ", ".join(m for m in match.allowed if m != "HEAD")
            return response
        request.scope["path_params"] = match.params
        _refuse_bad_url(request, match.params)
        if route is not None:
            # The guard may drain a refused body up to the server-wide ceiling.
            if route.guard is not None and (refused := await route.guard(request)) is not None:
                return refused
            if route.body_limit is not None:
                body.limit = route.body_limit
        if endpoint.instant:
            return _instant(endpoint.handler(request))
        with RequestDeadline(self.request_timeout):
            return await endpoint.handler(request)
        # --request-timeout: what the endpoint awaited is cancelled, its connection back in
        # the pool; a transaction in flight was waited for and wrote nothing (one that
        # committed lifts the deadline: storage/deadline.py), so the 503 hides no write.
        raise overrun(self.request_timeout)

    async def _edge_out(
        self,
        request: Request,
        response: Response,
        body: BodyReceiver,
        state: EdgeState,
        endpoint: Endpoint | None,
        started: float,
        origin: str | None,
    ) -> None:
        # Written on the raw header list: one pass, no case-insensitive lookups.
        raw = response.raw_headers
        present = {name for name, _ in raw}
        # a page with its own policy (the authorize form_post / web_message) keeps it
        raw.extend(header for header in self.security if header[0] not in present)
        if response.status_code in (408, 413) or not (
            body.complete or await body.finish(BODY_SECONDS)
        ):
            # The refused body may still be arriving: the connection cannot be reused.
            raw.append((b"connection", b"close"))
        raw.append((b"vary", b"Origin"))
        if origin:
            for name, value in edge.cors_headers(origin, self.runtime.origins).items():
                raw.append((name.lower().encode(), value.encode("latin-1")))
        raw.append((b"x-request-id", state.request_id.encode()))
        method = request.scope["method"]
        rule = endpoint.rule if endpoint is not None else "unmatched"
        elapsed = time.perf_counter() - started
        self._sample(method, rule, response.status_code).observe(elapsed)
        if access_log.isEnabledFor(logging.INFO):
            access_log.info(
                "request",
                extra={
                    "method": method,
                    "path": request.scope["path"],
                    "status": response.status_code,
                    "duration_ms": round(elapsed * 1000, 2),
                    "client_ip": state.client_ip,
                },
            )

    def _sample(self, method: str, rule: str, status: int) -> _Sample:
        """The metric children of one (method, route, status): looked up once, then kept
        (their number is bounded by the route table)."""
        key = (method, rule, status)
        sample = self._samples.get(key)
        if sample is None:
            metrics = self.runtime.metrics
            sample = _Sample(
                metrics.http_requests.labels(method, rule, str(status)),
                metrics.http_latency.labels(method, rule),
            )
            self._samples[key] = sample
        return sample


@dataclass(frozen=True, slots=True)
class _Sample:
    requests: Any
    latency: Any

    def observe(self, seconds: float) -> None:
        self.requests.inc()
        self.latency.observe(seconds)


def _describe(span: Any, method: str, endpoint: Endpoint | None, path: str, status: int) -> None:
    """Name a request's span by its route (``POST /v1/login``), as OpenTelemetry's HTTP
    conventions do, once the route and the status are known."""
    route = endpoint.rule if endpoint is not None else None
    span.update_name(f"{method} {route}" if route else method)
    span.set_attributes(
        {
            "http.request.method": method,
            "http.route": route or "",
            "url.path": path,
            "http.response.status_code": status,
        }
    )
    if status >= 500:
        tracing.mark_failed(span, str(status))


def _instant(answering: Awaitable[Response]) -> Response:
    """The answer of an endpoint declared never to wait (:attr:`View.instant`), without
    the deadline's cancel scope (which costs more than the rest of the edge). Nothing
    that does not wait can be cancelled, so the deadline holds the same. One that waits
    all the same (its first step asks trio to suspend it) is stopped where it is, before
    trio sees the request, and fails: a wrong declaration shows at once, never as a
    request without a deadline."""
    steps = answering.__await__()
    try:
        steps.send(None)
    except StopIteration as done:
        answer: Response = done.value
        return answer
    steps.close()
    raise RuntimeError("an endpoint declared instant waited")


def _failure(exc: Exception, path: str) -> Response:
    """The answer to a request that raised ``exc``."""
    if isinstance(exc, StorageUnavailable):
        # Its message names the store's address: logged, never answered.
        if path in _HEALTH_PATHS:
            return json_response({"status": "not ready", "error": f"{exc.store} unavailable"}, 503)
        log.error(
            "storage unavailable",
            extra={"path": path, "error": str(exc), "error_type": type(exc).__name__},
        )
        return error_response(errors.Unavailable("storage unavailable"))
    if isinstance(exc, errors.BastionError):
        if isinstance(exc, errors.ServerError):
            log.error(
                "request failed",
                extra={"error_code": exc.code, "error_type": type(exc).__name__, "path": path},
            )
        return error_response(exc)
    if isinstance(exc, ClientDisconnect):
        return error_response(errors.InvalidArgument("the request body was cut short"))
    if isinstance(exc, HTTPException | MultiPartException):
        # Starlette's form parser refusing a malformed multipart body
        detail = getattr(exc, "detail", None) or getattr(exc, "message", "bad request")
        return error_response(errors.InvalidArgument(str(detail)))
    log.error("unhandled error", exc_info=exc, extra={"path": path})
    return error_response(errors.Internal("internal server error"))


def _wanted(*names: str) -> dict[bytes, str]:
    return {name.encode(): name for name in names}


#: The request headers the edge itself reads, and those of the caller's context.
_EDGE_HEADERS = _wanted(
    "x-request-id", "content-length", "transfer-encoding", "origin", "traceparent", "tracestate"
)
_CALLER_HEADERS = _wanted(
    "authorization",
    "user-agent",
    "x-service-admin-secret",
    "x-authorizer-admin-secret",
    "x-authorizer-client-id",
)


def _first_values(raw: Iterable[tuple[bytes, bytes]], wanted: dict[bytes, str]) -> dict[str, str]:
    """The ``wanted`` headers a request has, each with its first value, as Starlette's
    ``Headers.get`` reads them (ASGI names are lower-case), in one pass instead of one a
    lookup."""
    found: dict[str, str] = {}
    for name, value in raw:
        key = wanted.get(name)
        if key is not None and key not in found:
            found[key] = value.decode("latin-1")
    return found


def _refuse_bad_url(request: Request, path_params: Mapping[str, Any]) -> None:
    """The input rules (NUL, unpaired surrogates) on every route's path parameters and
    query string, as on bodies: no database sees them (PostgreSQL would fail with 500)."""
    if (why := input_rules.refusal(path_params, "path")) is not None:
        raise errors.InvalidArgument(why)
    for name, value in request.query_params.multi_items():
        if (why := input_rules.refusal({name: value}, "query")) is not None:
            raise errors.InvalidArgument(why)


def _all_values(raw: Iterable[tuple[bytes, bytes]], name: bytes) -> list[str]:
    """Every line of header ``name``, in the order sent (ASGI names are lower-case)."""
    return [value.decode("latin-1") for key, value in raw if key == name]


def _declared_length(scope: Scope, headers: dict[str, str]) -> int | None:
    """The body's length when known before reading it. HTTP/1 frames a body only by
    Content-Length or Transfer-Encoding: with neither there is none (0), and nothing
    is left to finish after the answer (HTTP/2 may send a body without either)."""
    declared = headers.get("content-length")
    if declared is None:
        if scope.get("http_version") in _HTTP1 and "transfer-encoding" not in headers:
            return 0
        return None
    # The servers refuse a malformed or repeated Content-Length before the app sees it.
    return int(declared) if declared.isdigit() else None


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to start or stop here (the runtime is started by the server entry)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def create_app(
    runtime: Runtime, routes: list[Route], views: Sequence[ViewRegistrar] = ()
) -> HttpApp:
    """The HTTP server's application: ``routes`` (JSON operations, and /openapi.json
    generated from them) and ``views`` behind the edge's checks."""
    settings = runtime.settings
    routes = list(routes)
    document: dict[str, Any] = {}

    async def openapi(_: dict[str, Any], __: CallerContext) -> Reply:
        return Reply(document)

    routes.append(
        Route(
            method="GET",
            path="/openapi.json",
            operation=openapi,
            summary="This document, generated from the served route table",
            tag="discovery",
            rate_limit_exempt=True,
            constant=True,
        )
    )
    document.update(
        openapi_document(
            routes, title="bastion", version=runtime.service.version, server_url=settings.url
        )
    )
    dispatcher = Dispatcher()
    for route in routes:
        dispatcher.add(route.path, (route.method,), Endpoint(route_view(route), route.path, route))
    for register in views:
        for view in register(caller_context):
            endpoint = Endpoint(view.handler, view.path, instant=view.instant)
            dispatcher.add(view.path, view.methods, endpoint)
    document["paths"].update(view_paths(dispatcher.served(), documented=document["paths"]))
    return HttpApp(runtime, dispatcher, request_timeout=settings.request_timeout)


def route_view(route: Route) -> Handler:
    if route.constant:
        return _constant_view(route)

    async def view(request: Request) -> Response:
        if route.method != "GET":
            body = await read_json_object(request)
        else:
            body = query_values(request)  # the edge refused a bad query (_refuse_bad_url)
        reply = await route.operation(body, caller_context(request))
        return with_cookies(json_response(reply.body), reply.cookies)

    return view


def _constant_view(route: Route) -> Handler:
    """Serialise the answer on the first call only (the OpenAPI document is large)."""
    encoded: list[bytes] = []

    async def view(request: Request) -> Response:
        if not encoded:
            reply = await route.operation({}, caller_context(request))
            encoded.append(json.dumps(reply.body, separators=(",", ":")).encode())
        return Response(encoded[0], media_type="application/json")

    return view
