"""Public operations that need no user: meta."""

from __future__ import annotations

from bastion.conformance.scenario import Ctx, scenario


@scenario("meta")
def meta(ctx: Ctx) -> None:
    """meta answers the feature flags and this application's client id, unauthenticated."""
    body = ctx.expect_ok(ctx.call("meta"), client_id=ctx.deployment.client_id)
    ctx.expect(bool(body.get("version")), f"meta has no version: {body}")
