"""Sessions across instances: a session started through one instance is validated,
ended and refused through the others (one shared store, no sticky sessions)."""

from __future__ import annotations

from bastion.conformance.catalogue.auth import PASSWORD, SESSION_COOKIE, new_user, password_signup
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario


@scenario("sessions.revocation_seen_on_every_instance", requires=password_signup)
def revocation_everywhere(ctx: Ctx) -> None:
    """A token is valid on every instance; once the admin revokes the user's access, the
    token and the session cookie are refused on every instance at once, and an enable
    lets the user sign in again."""
    email, body, cookie = new_user(ctx)
    bearer = Credentials(bearer=body["access_token"])
    rounds = len(ctx.instances())
    check = {"token_type": "access_token", "token": body["access_token"]}
    for i in range(rounds):
        answer = ctx.expect_ok(ctx.call("validate_jwt_token", check, label=f"validate {i}"))
        ctx.expect(answer.get("is_valid") is True, f"instance {i}: {answer}")
    user = ctx.expect_ok(ctx.call("user", {"email": email}, ctx.admin))
    ctx.expect_ok(ctx.call("revoke_access", {"user_id": user["id"]}, ctx.admin))
    for i in range(rounds):
        ctx.expect_error(
            ctx.call("profile", credentials=bearer, label=f"token {i}"), "unauthenticated"
        )
        session = Credentials(cookies=((SESSION_COOKIE, cookie),))
        ctx.expect_error(ctx.call("session", {}, session, label=f"cookie {i}"), "unauthenticated")
    ctx.expect_ok(ctx.call("enable_access", {"user_id": user["id"]}, ctx.admin))
    ctx.expect_ok(ctx.call("login", {"email": email, "password": PASSWORD}))
