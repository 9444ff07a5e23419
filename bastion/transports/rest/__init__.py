"""REST: the JSON operations under ``/v1``, health and discovery, and the HTTP views that
are not JSON-in/JSON-out (redirects, form posts, the OAuth provider's endpoints).

Imports ``service`` facades, ``core`` types and the shared HTTP pieces of
``transports.http``; never another transport.
"""

from __future__ import annotations

from typing import Any

from bastion.service.context import CallerContext, Reply
from bastion.service.requests import bind
from bastion.service.runtime import Runtime
from bastion.transports.http.app import ViewRegistrar
from bastion.transports.http.routes import Route
from bastion.transports.rest.admin import admin_routes
from bastion.transports.rest.auth import auth_routes, oauth_views
from bastion.transports.rest.fga import fga_routes
from bastion.transports.rest.oauth import provider_views
from bastion.transports.rest.passkeys import passkey_routes
from bastion.transports.rest.social import social_views

__all__ = ["api_routes", "health_routes", "views"]

_HEALTH_SCHEMA = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}, "error": {"type": "string"}},
}


def health_routes(runtime: Runtime) -> list[Route]:
    async def live(_: dict[str, Any], __: CallerContext) -> Reply:
        """Liveness: the process answers. Never storage: a database outage must not make
        an orchestrator restart every instance (readiness, /readyz, reports it)."""
        return Reply({"status": "ok"})

    async def ready(_: dict[str, Any], __: CallerContext) -> Reply:
        await runtime.check_ready()
        return Reply({"status": "ready"})

    common: dict[str, Any] = {
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
            operation=bind(service.meta),
            summary="Server feature flags and provider availability",
            tag="public",
        ),
        Route(
            method="POST",
            path="/v1/admin/login",
            operation=bind(service.admin_login),
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
            operation=bind(service.admin_logout),
            summary="End the admin session",
            tag="admin",
            request_schema={"type": "object"},
            response_schema=message,
            extra_statuses=(401,),
        ),
        Route(
            method="GET",
            path="/v1/admin/session",
            operation=bind(service.admin_session),
            summary="Renew the admin session cookie",
            tag="admin",
            response_schema=message,
            extra_statuses=(401,),
        ),
        Route(
            method="GET",
            path="/v1/admin/meta",
            operation=bind(service.admin_meta),
            summary="Meta plus the admin-only fields",
            tag="admin",
            extra_statuses=(401,),
        ),
        *fga_routes(runtime.fga),
        *admin_routes(runtime.admin),
        *auth_routes(runtime.auth),
        *passkey_routes(runtime.passkeys),
    ]


def views(runtime: Runtime) -> list[ViewRegistrar]:
    """The email-link landing, social login and the OAuth 2.0 / OpenID Connect provider."""
    return [
        lambda caller: oauth_views(runtime.auth, caller),
        lambda caller: social_views(runtime.social, caller),
        lambda caller: provider_views(runtime.oauth, caller),
    ]
