"""Rows that exist only on HTTP (REST and GraphQL): 405 and the CSRF Origin rule, and the
GraphQL-only deprecated mutations. gRPC has neither methods nor browsers: n/a there."""

from __future__ import annotations

from bastion.conformance.operations import DEPRECATED_GRAPHQL
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import HTTP_SURFACES, Ctx, Failure, scenario
from bastion.conformance.surfaces.graphql import GraphQLSurface, document

#: Valid inputs, so that the refusal is the operation's, not input validation's.
_SAMPLES = {"_admin_signup": {"admin_secret": "unused"}, "_generate_jwt_keys": {"type": "HS256"}}


@scenario("http.method_not_allowed", surfaces=HTTP_SURFACES)
def method_not_allowed(ctx: Ctx) -> None:
    """GET on a POST-only endpoint is 405 method_not_allowed."""
    wrong = Credentials(http_method="GET")
    ctx.expect_error(ctx.call("admin_login", {}, wrong), "method_not_allowed")
    ctx.expect_error(
        ctx.call("admin_logout", {}, Credentials(http_method="PUT")), "method_not_allowed"
    )


@scenario("http.csrf_origin_required", surfaces=HTTP_SURFACES)
def csrf(ctx: Ctx) -> None:
    """A state-changing POST without Origin or Referer is 403, before anything else runs."""
    no_origin = Credentials(origin=False)
    # Refused before anything runs: the real secret (when the run has it) must not log in.
    secret = ctx.deployment.admin_secret or "not-the-admin-secret"
    refused = ctx.call("admin_login", {"admin_secret": secret}, no_origin)
    ctx.expect_error(refused, "permission_denied")
    ctx.expect(not refused.cookies, "a refused request set cookies")


@scenario("graphql.deprecated_mutations", surfaces=("graphql",))
def deprecated(ctx: Ctx) -> None:
    """Authorizer's deprecated mutations answer their fixed messages."""
    surface = ctx.surface
    if not isinstance(surface, GraphQLSurface):
        raise Failure("this row runs on the GraphQL surface only")
    for name, message in DEPRECATED_GRAPHQL.items():
        query, variables = document(surface.schema, name, _SAMPLES.get(name, {}))
        outcome = ctx.deployment.pacer.send(
            lambda n=name, q=query, v=variables: surface.execute(n, q, v, ctx.admin)
        )
        ctx.expect(
            not outcome.ok and outcome.message == message,
            f"{name}: {outcome.describe()} (expected {message!r})",
        )
