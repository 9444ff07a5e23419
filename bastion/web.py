"""The HTTP application, assembled from the transports that speak over HTTP: REST,
GraphQL (and its playground), the hosted login pages, OpenFGA's API."""

from __future__ import annotations

from bastion.service.runtime import Runtime
from bastion.transports import rest
from bastion.transports.graphql.http import graphql_route
from bastion.transports.graphql.playground import playground_views
from bastion.transports.http.app import HttpApp, ViewRegistrar, create_app
from bastion.transports.openfga import openfga_views
from bastion.transports.pages import login_page_views

__all__ = ["build_http_app"]


def build_http_app(runtime: Runtime) -> HttpApp:
    settings = runtime.settings
    routes = rest.health_routes(runtime)
    if settings.enable_grpc:
        routes += rest.api_routes(runtime)
    routes.append(graphql_route(runtime))
    views: list[ViewRegistrar] = rest.views(runtime)
    if settings.enable_playground:
        views.append(lambda _caller: playground_views())
    if settings.enable_login_page:
        views.append(
            lambda caller: login_page_views(
                settings, runtime.auth, runtime.service.meta, caller, runtime.passkeys
            )
        )
    if runtime.openfga.enabled:
        views.append(lambda caller: openfga_views(runtime.openfga, caller))
    return create_app(runtime, routes, views)
