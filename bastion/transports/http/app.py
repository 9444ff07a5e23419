"""The quart-trio application: the HTTP edge in front of the routes and views it is given.

Order of the edge, for every request: client address (``--trusted-proxies``) -> CORS
preflight -> per-IP rate limit -> CSRF -> route. Every response, errors included, gets
the security headers, CORS headers for an allowed origin, and a metrics sample.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio
from quart import Response, g, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, RequestEntityTooLarge

from bastion.core import errors, input_rules
from bastion.core.networks import client_ip
from bastion.core.out_of_scope import OUT_OF_SCOPE_MESSAGE, is_out_of_scope
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.runtime import Runtime
from bastion.storage import StorageUnavailable
from bastion.transports.http import edge
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.errors import http_status
from bastion.transports.http.routes import Route, openapi_document, view_paths

log = logging.getLogger("bastion.http")
#: One line per request at info level: method, path (never the query: it may carry a
#: token), status, duration, client address, request id.
access_log = logging.getLogger("bastion.access")

#: Largest request body accepted on any route.
MAX_BODY_BYTES = 1024 * 1024
#: ``Retry-After`` of a 503: storage down, or a request past its deadline.
RETRY_UNAVAILABLE_SECONDS = 1


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
    elif isinstance(error, errors.Unavailable):
        headers["Retry-After"] = str(RETRY_UNAVAILABLE_SECONDS)
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


_HEALTH_FAILURE = {
    "/readyz": {"status": "not ready", "error": "storage unavailable"},
}


#: Adds the views that are not JSON-in/JSON-out (redirects, forms, pages) to the app;
#: given how to read the caller of the current request.
ViewRegistrar = Callable[[QuartTrio, Callable[[], CallerContext]], None]


def create_app(
    runtime: Runtime, routes: list[Route], views: Sequence[ViewRegistrar] = ()
) -> QuartTrio:
    """The HTTP server's application: ``routes`` (JSON operations, and /openapi.json
    generated from them) and ``views`` behind the edge's checks."""
    settings = runtime.settings
    app = QuartTrio(__name__)
    # The hard ceiling for every route; a route may read less (``Route.body_limit``).
    app.config["MAX_CONTENT_LENGTH"] = max(
        [MAX_BODY_BYTES, *(r.body_limit for r in routes if r.body_limit is not None)]
    )
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False

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
    by_endpoint: dict[str, Route] = {}
    for route in routes:
        endpoint = f"{route.method} {route.path}"
        by_endpoint[endpoint] = route
        app.add_url_rule(
            route.path, endpoint=endpoint, view_func=route_view(route), methods=[route.method]
        )
    for register in views:
        register(app, caller_context)
    served = [(rule.rule, rule.methods or ()) for rule in app.url_map.iter_rules()]
    document["paths"].update(view_paths(served, documented=document["paths"]))
    for endpoint, view in list(app.view_functions.items()):
        app.view_functions[endpoint] = _within_deadline(view, settings.request_timeout)

    security = edge.security_headers(csp=not settings.disable_csp, hsts=settings.enable_hsts)

    @app.before_request
    async def edge_in() -> Response | None:
        g.started = time.perf_counter()
        g.request_id = edge.request_id(request.headers.get("x-request-id"))
        peer = (request.scope.get("client") or ("unknown", 0))[0]
        g.client_ip = client_ip(
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
        if route is not None and route.body_limit is not None:
            g.body_limit = route.body_limit
        if route is not None and route.guard is not None:
            refused: Response | None = await route.guard()
            return refused
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
            elapsed = time.perf_counter() - started
            runtime.metrics.http_latency.labels(method, rule).observe(elapsed)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "request",
                    extra={
                        "method": method,
                        "path": request.path,
                        "status": response.status_code,
                        "duration_ms": round(elapsed * 1000, 2),
                        "client_ip": getattr(g, "client_ip", ""),
                        "request_id": getattr(g, "request_id", ""),
                    },
                )
        if (rid := getattr(g, "request_id", None)) is not None:
            response.headers["X-Request-Id"] = rid
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
            admin_operation = request.path.removeprefix("/v1/admin/")
            if admin_operation != request.path and is_out_of_scope(admin_operation):
                return error_response(errors.Unimplemented(OUT_OF_SCOPE_MESSAGE))
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


def _within_deadline(view: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``view`` answering 503 ``unavailable`` once ``seconds`` have passed (--request-timeout):
    what it awaits is cancelled (a PostgreSQL query on the server too), its connection
    returns to the pool."""

    @functools.wraps(view)
    async def bounded(*args: Any, **kwargs: Any) -> Any:
        with trio.move_on_after(seconds):
            answer = view(*args, **kwargs)
            return await answer if inspect.isawaitable(answer) else answer
        raise errors.Unavailable(f"the request did not finish within {seconds:g}s")

    return bounded


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
