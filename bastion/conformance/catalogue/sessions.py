"""Sessions across instances: a session started through one instance is validated,
ended and refused through the others (one shared store, no sticky sessions); a user's own
list of sessions, and signing one device out (issue 22)."""

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


#: Where and when a session was used differ by surface (each has its own client).
SEEN = frozenset({"created_at", "last_used_at", "ip", "user_agent"})


@scenario("sessions.list_and_revoke_another_device", requires=password_signup, volatile=SEEN)
def list_and_revoke(ctx: Ctx) -> None:
    """Signed in on two devices, the user lists both (one current), signs the other out,
    and its token is refused on every instance at once; that id is then unknown, as is
    any id not the caller's."""
    email, body, _cookie = new_user(ctx)
    laptop = Credentials(bearer=body["access_token"])
    second = ctx.expect_ok(ctx.call("login", {"email": email, "password": PASSWORD}))
    phone = Credentials(bearer=second["access_token"])
    listed = ctx.expect_ok(ctx.call("sessions", {}, laptop))["sessions"]
    ctx.expect(sorted(s["current"] for s in listed) == [False, True], f"listed {listed}")
    other = next(s["id"] for s in listed if not s["current"])
    ctx.expect_ok(ctx.call("revoke_session", {"id": other}, laptop))
    for i in range(len(ctx.instances())):
        ctx.expect_error(
            ctx.call("profile", credentials=phone, label=f"revoked {i}"), "unauthenticated"
        )
    left = ctx.expect_ok(ctx.call("sessions", {}, laptop, label="after"))["sessions"]
    ctx.expect([s["current"] for s in left] == [True], f"left {left}")
    again = ctx.call("revoke_session", {"id": other}, laptop, label="again")
    ctx.expect_error(again, "not_found")
    no_id = ctx.call("revoke_session", {"id": ""}, laptop, label="no id")
    ctx.expect_error(no_id, "invalid_argument")
    ctx.expect_error(ctx.call("sessions", label="anonymous"), "unauthenticated")


@scenario(
    "sessions.admin_lists_and_revokes_a_users_sessions", requires=password_signup, volatile=SEEN
)
def admin_lists_and_revokes(ctx: Ctx) -> None:
    """The admin lists a user's two sessions (neither is the admin's own), signs one out
    (refused at once on every instance), then every one: the account stays usable. Only
    with the admin's secret; an unknown user or session is not found."""
    email, body, _cookie = new_user(ctx)
    laptop = Credentials(bearer=body["access_token"])
    second = ctx.expect_ok(ctx.call("login", {"email": email, "password": PASSWORD}))
    phone = Credentials(bearer=second["access_token"])
    user = ctx.expect_ok(ctx.call("user", {"email": email}, ctx.admin))
    wanted = {"user_id": user["id"]}
    ctx.expect_error(ctx.call("user_sessions", wanted, label="no secret"), "unauthenticated")
    listed = ctx.expect_ok(ctx.call("user_sessions", wanted, ctx.admin))["sessions"]
    ctx.expect([s["current"] for s in listed] == [False, False], f"listed {listed}")
    phones = ctx.expect_ok(ctx.call("sessions", {}, phone))["sessions"][0]["id"]
    ctx.expect(phones in {s["id"] for s in listed}, f"{phones} not in {listed}")
    row = {**wanted, "id": phones}
    refused = ctx.call("revoke_user_session", row, label="no secret")
    ctx.expect_error(refused, "unauthenticated")
    done = ctx.call("revoke_user_session", row, ctx.admin)
    ctx.expect_ok(done, message="session revoked successfully")
    for i in range(len(ctx.instances())):
        ctx.expect_error(
            ctx.call("profile", credentials=phone, label=f"revoked {i}"), "unauthenticated"
        )
    again = ctx.call("revoke_user_session", row, ctx.admin, label="again")
    ctx.expect_error(again, "not_found")
    ctx.expect_ok(ctx.call("profile", credentials=laptop, label="laptop lives"))
    everything = ctx.call("revoke_all_user_sessions", wanted, ctx.admin)
    ctx.expect_ok(everything, message="user sessions revoked successfully")
    for i in range(len(ctx.instances())):
        ctx.expect_error(
            ctx.call("profile", credentials=laptop, label=f"all revoked {i}"), "unauthenticated"
        )
    left = ctx.expect_ok(ctx.call("user_sessions", wanted, ctx.admin, label="after"))
    ctx.expect(not left.get("sessions"), f"left {left}")  # gRPC leaves an empty list out
    ctx.expect_ok(ctx.call("login", {"email": email, "password": PASSWORD}, label="again"))
    unknown = {"user_id": "00000000-0000-0000-0000-000000000000"}
    ctx.expect_error(ctx.call("user_sessions", unknown, ctx.admin, label="unknown"), "not_found")
