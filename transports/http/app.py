"""The quart-trio application: REST under /v1, health, discovery, and the HTTP edge.

Order of the edge, for every request: client address (``--trusted-proxies``) -> CORS
preflight -> per-IP rate limit -> CSRF -> route. Every response, errors included, gets
the security headers, CORS headers for an allowed origin, and a metrics sample.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, RequestEntityTooLarge

from core import errors, input_rules
from core.settings import Settings
from storage import StorageUnavailable
from transports.admin.routes import admin_graphql, admin_routes
from transports.auth.routes import auth_graphql, auth_routes, register_oauth_views
from transports.context import CallerContext, Protocol, Reply
from transports.fga.routes import fga_graphql, fga_routes
from transports.graphql.limits import QueryLimits, check_body_size
from transports.graphql.playground import register_playground
from transports.graphql.surface import GraphQLSurface
from transports.http import edge
from transports.http.cookies import with_cookies
from transports.http.errors import http_status
from transports.http.routes import Route, openapi_document
from transports.oauth.routes import register_provider_views
from transports.pages import register_login_pages
from transports.runtime import Runtime
from transports.social.routes import register_social_views

log = logging.getLogger("bastion.http")

#: Largest request body accepted on any route.
MAX_BODY_BYTES = 1024 * 1024

_HEALTH_SCHEMA = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}, "error": {"type": "string"}},
}


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status=status,
        headers=headers,
        content_type="application/json",
    )


def error_response(error: errors.BastionError) -> Response:
    headers = {}
    if isinstance(error, errors.ResourceExhausted):
        headers["Retry-After"] = str(error.retry_after)
        if error.before_effect:
            headers[errors.BEFORE_EFFECT_MARK] = errors.BEFORE_EFFECT_VALUE
    return json_response(
        {"code": error.code, "message": error.message}, http_status(error), headers
    )


async def read_json_object() -> dict[str, Any]:
    """The request body as a JSON object; an empty body is ``{}``, unknown fields stay."""
    raw = await request.get_data(cache=False)
    if len(raw) > g.get("body_limit", MAX_BODY_BYTES):  # a chunked body declares no length
        raise errors.PayloadTooLarge("request body too large")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise errors.InvalidArgument("request body must be a JSON object") from None
    except RecursionError:
        raise errors.InvalidArgument(
            f"request body is nested more than {input_rules.MAX_DEPTH} levels deep"
        ) from None
    if not isinstance(body, dict):
        raise errors.InvalidArgument("request body must be a JSON object")
    if (why := input_rules.refusal(body, "body")) is not None:
        raise errors.InvalidArgument(why)
    return body


async def finish_request_body() -> bool:
    """Receive and discard whatever of the request body no handler read; False if it cannot.

    An answer given before the body has arrived (CSRF 403, 404, 405, a rate limit) would
    otherwise leave the rest of the body on the connection: the server then cannot reuse
    it and closes it under a client that may still be writing, which can lose the answer.
    A body over the limit, or one that stops arriving, is not waited for: the connection
    closes instead.
    """
    timeout = float("inf") if request.body_timeout is None else request.body_timeout
    with trio.move_on_after(timeout) as waited:
        try:
            async for _ in request.body:
                pass
        except RequestEntityTooLarge:
            return False
    return not waited.cancelled_caught


def caller_context() -> CallerContext:
    auth = request.headers.get("authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    return CallerContext(
        client_ip=g.client_ip,
        user_agent=request.headers.get("user-agent", ""),
        bearer_token=bearer or None,
        cookies=dict(request.cookies),
        admin_secret_header=request.headers.get("x-service-admin-secret")
        or request.headers.get("x-authorizer-admin-secret"),
        client_id_header=request.headers.get("x-authorizer-client-id"),
        protocol=Protocol.GRAPHQL if request.path == "/graphql" else Protocol.REST,
    )


def health_routes(runtime: Runtime) -> list[Route]:
    async def live(_: dict[str, Any], __: CallerContext) -> Reply:
        """Liveness: the process answers. Never storage: a database outage must not make
        an orchestrator restart every instance (readiness, /readyz, reports it)."""
        return Reply({"status": "ok"})

    async def ready(_: dict[str, Any], __: CallerContext) -> Reply:
        await runtime.check_ready()
        return Reply({"status": "ready"})

    common = {
        "tag": "health",
        "response_schema": _HEALTH_SCHEMA,
        "rate_limit_exempt": True,
        "extra_statuses": (503,),
    }
    return [
        Route(
            method="GET",
            path="/healthz",
            operation=live,
            summary="Liveness: the process answers (never storage)",
            **common,
        ),
        Route(
            method="GET",
            path="/health",
            operation=live,
            summary="Liveness (alias of /healthz)",
            **common,
        ),
        Route(
            method="GET",
            path="/readyz",
            operation=ready,
            summary="Readiness: storage and the memory store answer, the schema is current",
            **common,
        ),
    ]


def api_routes(runtime: Runtime) -> list[Route]:
    """REST under /v1. Mounted only with the gRPC server enabled (spec, Surfaces rule 2)."""
    service = runtime.service
    message = {"type": "object", "properties": {"message": {"type": "string"}}}
    return [
        Route(
            method="GET",
            path="/v1/meta",
            operation=service.meta,
            summary="Server feature flags and provider availability",
            tag="public",
        ),
        Route(
            method="POST",
            path="/v1/admin/login",
            operation=service.admin_login,
            summary="Exchange the admin secret for the admin session cookie",
            tag="admin",
            request_schema={
                "type": "object",
                "required": ["admin_secret"],
                "properties": {"admin_secret": {"type": "string"}},
            },
            response_schema=message,
            extra_statuses=(401,),
        ),
        Route(
            method="POST",
            path="/v1/admin/logout",
            operation=service.admin_logout,
            summary="End the admin session",
            tag="admin",
            request_schema={"type": "object"},
            response_schema=message,
            extra_statuses=(401,),
        ),
        Route(
            method="GET",
            path="/v1/admin/session",
            operation=service.admin_session,
            summary="Renew the admin session cookie",
            tag="admin",
            response_schema=message,
            extra_statuses=(401,),
        ),
        Route(
            method="GET",
            path="/v1/admin/meta",
            operation=service.admin_meta,
            summary="Meta plus the admin-only fields",
            tag="admin",
            extra_statuses=(401,),
        ),
        *fga_routes(runtime.fga),
        *admin_routes(runtime.admin),
        *auth_routes(runtime.auth),
    ]


def graphql_limits(settings: Settings) -> QueryLimits:
    """``--graphql-max-*`` and ``--enable-graphql-introspection``."""
    return QueryLimits(
        max_depth=settings.graphql_max_depth,
        max_aliases=settings.graphql_max_aliases,
        max_complexity=settings.graphql_max_complexity,
        max_body_bytes=settings.graphql_max_body_bytes,
        introspection=settings.enable_graphql_introspection,
    )


async def graphql_refusal(settings: Settings) -> Response | None:
    """What ``/graphql`` refuses before running anything, in Authorizer's shapes: a client
    id header naming another application (reference §2), a declared body over the limit."""
    # Empty counts as absent (Authorizer reads it with Go's Header.Get): authorizer-js
    # sends an empty one when configured without a client id.
    claimed = request.headers.get("x-authorizer-client-id")
    if claimed and not hmac.compare_digest(claimed.encode(), settings.client_id.encode()):
        return json_response(
            {"error": "invalid_client_id", "error_description": "The client id is invalid"}, 400
        )
    size = request.content_length
    too_big = None if size is None else check_body_size(size, graphql_limits(settings))
    if too_big is None:
        return None
    # Drain what the client is sending (at most the app's ceiling; beyond it the server
    # discards), or it may block writing and never read the answer.
    with contextlib.suppress(RequestEntityTooLarge):
        await request.get_data(cache=False)
    return json_response({"data": None, "errors": [too_big.formatted]}, 413)


def graphql_route(runtime: Runtime) -> Route:
    surface = GraphQLSurface(
        runtime.service,
        graphql_limits(runtime.settings),
        {
            **fga_graphql(runtime.fga),
            **admin_graphql(runtime.admin),
            **auth_graphql(runtime.auth),
        },
    )

    async def graphql(body: dict[str, Any], caller: CallerContext) -> Reply:
        return await surface.execute(body, caller)

    return Route(
        method="POST",
        path="/graphql",
        operation=graphql,
        summary="GraphQL (Authorizer 2.3 schema); errors come back in the body with HTTP 200",
        tag="graphql",
        request_schema={
            "type": "object",
            "required": ["query"],
            "properties": {
                "query": {"type": "string"},
                "variables": {"type": "object"},
                "operationName": {"type": "string"},
            },
        },
    )


_HEALTH_FAILURE = {
    "/readyz": {"status": "not ready", "error": "storage unavailable"},
}


def create_app(runtime: Runtime) -> QuartTrio:
    settings = runtime.settings
    app = QuartTrio("bastion")
    # The hard ceiling for every route; /graphql has its own (possibly larger) limit.
    app.config["MAX_CONTENT_LENGTH"] = max(MAX_BODY_BYTES, settings.graphql_max_body_bytes)
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False

    routes = health_routes(runtime)
    if settings.enable_grpc:
        routes += api_routes(runtime)
    routes.append(graphql_route(runtime))
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
    by_endpoint: dict[str, Route] = {}
    for route in routes:
        endpoint = f"{route.method} {route.path}"
        by_endpoint[endpoint] = route
        app.add_url_rule(
            route.path, endpoint=endpoint, view_func=route_view(route), methods=[route.method]
        )
    register_oauth_views(app, runtime.auth, caller_context)
    register_social_views(app, runtime.social, caller_context)
    register_provider_views(app, runtime.oauth, caller_context)
    if settings.enable_playground:
        register_playground(app)
    if settings.enable_login_page:
        register_login_pages(app, settings, runtime.auth, runtime.service.meta, caller_context)

    security = edge.security_headers(csp=not settings.disable_csp, hsts=settings.enable_hsts)

    @app.before_request
    async def edge_in() -> Response | None:
        g.started = time.perf_counter()
        peer = (request.scope.get("client") or ("unknown", 0))[0]
        g.client_ip = edge.client_ip(
            peer, request.headers.get("x-forwarded-for"), runtime.trusted_proxies
        )
        if request.method == "OPTIONS":
            return Response("", status=204, headers=_preflight_headers())
        route = by_endpoint.get(request.url_rule.endpoint) if request.url_rule else None
        exempt = route.rate_limit_exempt if route else False
        # Discovery documents are fetched by every relying party and cached; never limit them.
        if not exempt and not request.path.startswith("/.well-known/"):
            await runtime.rate_limiter.check(g.client_ip, surface="http")
        refusal = edge.csrf_refusal(request.method, request.path, request.headers, runtime.origins)
        if refusal is not None:
            raise errors.PermissionDenied(refusal)
        if request.path == "/graphql":
            g.body_limit = settings.graphql_max_body_bytes
            return await graphql_refusal(settings)
        return None

    def _preflight_headers() -> dict[str, str]:
        headers = {
            "Access-Control-Allow-Methods": edge.CORS_ALLOW_METHODS,
            "Access-Control-Allow-Headers": edge.CORS_ALLOW_HEADERS,
            "Access-Control-Max-Age": "600",
        }
        return headers

    @app.after_request
    async def edge_out(response: Response) -> Response:
        for name, value in security.items():
            # a page with its own policy (the authorize form_post / web_message) keeps it
            if name not in response.headers:
                response.headers[name] = value
        if response.status_code in (408, 413) or not await finish_request_body():
            # The refused body may still be arriving: the connection cannot be reused.
            response.headers["Connection"] = "close"
        response.headers.add("Vary", "Origin")
        for name, value in edge.cors_headers(
            request.headers.get("origin"), runtime.origins
        ).items():
            response.headers[name] = value
        rule = request.url_rule.rule if request.url_rule else "unmatched"
        method = request.method
        runtime.metrics.http_requests.labels(method, rule, str(response.status_code)).inc()
        started = getattr(g, "started", None)
        if started is not None:
            runtime.metrics.http_latency.labels(method, rule).observe(time.perf_counter() - started)
        return response

    @app.errorhandler(errors.BastionError)
    async def on_bastion_error(error: errors.BastionError) -> Response:
        if isinstance(error, errors.ServerError):
            log.error("request failed", extra={"error_code": error.code, "path": request.path})
        return error_response(error)

    @app.errorhandler(StorageUnavailable)
    async def on_storage_down(error: StorageUnavailable) -> Response:
        failure = _HEALTH_FAILURE.get(request.path)
        if failure is not None:
            return json_response(failure, 503)
        log.error("storage unavailable", extra={"path": request.path})
        return error_response(errors.Unavailable("storage unavailable"))

    @app.errorhandler(HTTPException)
    async def on_http_error(error: HTTPException) -> Response:
        if isinstance(error, MethodNotAllowed):
            allow = ", ".join(sorted(m for m in (error.valid_methods or []) if m != "HEAD"))
            response = error_response(errors.MethodNotAllowed("method not allowed"))
            response.headers["Allow"] = allow
            return response
        if isinstance(error, NotFound):
            return error_response(errors.NotFound("not found"))
        if isinstance(error, RequestEntityTooLarge):
            return error_response(errors.PayloadTooLarge("request body too large"))
        return json_response(
            {"code": "invalid_argument", "message": error.description or "bad request"},
            error.code or 400,
        )

    @app.errorhandler(Exception)
    async def on_unexpected(error: Exception) -> Response:
        log.exception("unhandled error", extra={"path": request.path})
        return error_response(errors.Internal("internal server error"))

    return app


def route_view(route: Route) -> Callable[[], Awaitable[Response]]:
    if route.constant:
        return _constant_view(route)

    async def view() -> Response:
        if route.method != "GET":
            body = await read_json_object()
        else:
            body = dict(request.args)
            if (why := input_rules.refusal(body, "query")) is not None:
                raise errors.InvalidArgument(why)
        reply = await route.operation(body, caller_context())
        return with_cookies(json_response(reply.body), reply.cookies)

    return view


def _constant_view(route: Route) -> Callable[[], Awaitable[Response]]:
    """Serialise the answer on the first call only (the OpenAPI document is large)."""
    encoded: list[str] = []

    async def view() -> Response:
        if not encoded:
            reply = await route.operation({}, caller_context())
            encoded.append(json.dumps(reply.body, separators=(",", ":")))
        return Response(encoded[0], content_type="application/json")

    return view
