"""Admin user management (issue 6): find, update, revoke and enable access, delete."""

from __future__ import annotations

from bastion.conformance.catalogue.auth import new_user, password_signup
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario


@scenario("admin.users_update_revoke_enable_delete", requires=password_signup)
def users(ctx: Ctx) -> None:
    """An admin reads a user by email, renames it, revokes and re-enables its access
    (a revoked user's token stops working), and deletes it."""
    admin = ctx.admin
    email, body, _ = new_user(ctx)
    bearer = Credentials(bearer=body["access_token"])
    user = ctx.expect_ok(ctx.call("user", {"email": email}, admin), email=email)
    user_id = str(user.get("id"))
    ctx.expect_ok(
        ctx.call("update_user", {"id": user_id, "given_name": "Admin Renamed"}, admin),
        given_name="Admin Renamed",
    )
    ctx.expect_ok(ctx.call("revoke_access", {"user_id": user_id}, admin))
    ctx.expect_error(ctx.call("profile", credentials=bearer), "unauthenticated")
    revoked = ctx.expect_ok(ctx.call("user", {"id": user_id}, admin))
    ctx.expect(bool(revoked.get("revoked_timestamp")), f"no revoked_timestamp: {revoked}")
    ctx.expect_ok(ctx.call("enable_access", {"user_id": user_id}, admin))
    ctx.expect_ok(ctx.call("delete_user", {"email": email}, admin))
    ctx.expect_error(ctx.call("user", {"email": email}, admin), "not_found")
    ctx.expect_error(ctx.call("users", {}), "unauthenticated")
