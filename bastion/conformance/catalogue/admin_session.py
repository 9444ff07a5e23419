"""The super-admin session: header versus cookie, login, renewal, logout."""

from __future__ import annotations

from bastion.conformance.discovery import ADMIN_COOKIE, NO_ADMIN, Deployment
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario

#: One wrong secret for every run: a deployment counts the distinct wrong secrets an
#: address sends (and then refuses it even the right one for a while), so a suite run
#: again and again from one machine must not look like guessing.
WRONG_SECRET = "conformance-suite-wrong-admin-secret"

ADMIN_ONLY = ("roles", "default_roles", "protected_roles")


def _header_auth(deployment: Deployment) -> str | None:
    return None if deployment.header_auth else "the deployment refuses the admin header"


@scenario("admin.login_wrong_secret")
def login_wrong_secret(ctx: Ctx) -> None:
    """A wrong admin secret is unauthenticated and sets no cookie."""
    outcome = ctx.call("admin_login", {"admin_secret": WRONG_SECRET})
    ctx.expect_error(outcome, "unauthenticated")
    ctx.expect(not outcome.cookies, f"a refused login set cookies: {outcome.cookies}")


def _admin_secret(deployment: Deployment) -> str | None:
    return None if deployment.admin_secret is not None else NO_ADMIN


@scenario("admin.cookie_session", requires=_admin_secret)
def cookie_session(ctx: Ctx) -> None:
    """Login sets the admin cookie; the cookie authorises, renews, and logout clears it."""
    login = ctx.call("admin_login", {"admin_secret": ctx.deployment.admin_secret})
    ctx.expect_ok(login)
    value = login.cookie(ADMIN_COOKIE)
    ctx.expect(value is not None, f"admin_login set no {ADMIN_COOKIE} cookie")
    cookie = Credentials(cookies=((ADMIN_COOKIE, value or ""),))
    ctx.expect_ok(ctx.call("admin_meta", credentials=cookie, only=ADMIN_ONLY))
    renewed = ctx.call("admin_session", credentials=cookie)
    ctx.expect_ok(renewed)
    ctx.expect(renewed.cookie(ADMIN_COOKIE) is not None, "admin_session did not renew the cookie")
    cookie = Credentials(cookies=((ADMIN_COOKIE, renewed.cookie(ADMIN_COOKIE) or ""),))
    out = ctx.call("admin_logout", credentials=cookie)
    ctx.expect_ok(out)
    ctx.expect(
        any(c.name == ADMIN_COOKIE and c.cleared for c in out.cookies),
        f"admin_logout did not clear the cookie: {out.cookies}",
    )
    ctx.expect_error(ctx.call("admin_meta", credentials=cookie), "unauthenticated")


@scenario("admin.header_versus_none", requires=_header_auth)
def header_versus_none(ctx: Ctx) -> None:
    """The admin header authorises admin operations; none or a wrong one is unauthenticated."""
    # REST answers meta plus the admin-only fields (spec); Authorizer's GraphQL and
    # protobuf AdminMeta types carry the admin-only fields alone.
    meta = ctx.expect_ok(ctx.call("admin_meta", credentials=ctx.admin, only=ADMIN_ONLY))
    ctx.expect(bool(meta.get("roles")), f"admin_meta has no roles: {meta}")
    if ctx.surface.name == "rest":
        ctx.expect(meta.get("client_id") == ctx.deployment.client_id, f"admin_meta: {meta}")
    ctx.expect_error(ctx.call("admin_meta"), "unauthenticated")
    wrong = Credentials(admin_secret=WRONG_SECRET)
    ctx.expect_error(ctx.call("admin_meta", credentials=wrong), "unauthenticated")
    ctx.expect_error(ctx.call("admin_session"), "unauthenticated")
    ctx.expect_error(ctx.call("admin_logout"), "unauthenticated")
