"""The HTTP application, assembled from the transports that speak over HTTP: REST,
GraphQL (and its playground), the hosted login pages."""

from __future__ import annotations

from quart_trio import QuartTrio

from bastion.service.runtime import Runtime
from bastion.transports import rest
from bastion.transports.graphql.http import graphql_route
from bastion.transports.graphql.playground import register_playground
from bastion.transports.http.app import ViewRegistrar, create_app
from bastion.transports.openfga import register_openfga
from bastion.transports.pages import register_login_pages

__all__ = ["build_http_app"]


def build_http_app(runtime: Runtime) -> QuartTrio:
    settings = runtime.settings
    routes = rest.health_routes(runtime)
    if settings.enable_grpc:
        routes += rest.api_routes(runtime)
    routes.append(graphql_route(runtime))
    views: list[ViewRegistrar] = rest.views(runtime)
    if settings.enable_playground:
        views.append(lambda app, _caller: register_playground(app))
    if settings.enable_login_page:
        views.append(
            lambda app, caller: register_login_pages(
                app, settings, runtime.auth, runtime.service.meta, caller
            )
        )
    if runtime.openfga.enabled:
        views.append(lambda app, caller: register_openfga(app, runtime.openfga, caller))
    return create_app(runtime, routes, views)
