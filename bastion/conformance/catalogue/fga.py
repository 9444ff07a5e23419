"""The authorization engine: model, tuples, check/list, read with pagination, list_users,
expand, reset, its limits and errors, and the failed_precondition rows of a deployment
that runs without it (``--fga-store=none``)."""

from __future__ import annotations

import json
from typing import Any

from bastion.conformance.catalogue.auth import new_user, password_signup
from bastion.conformance.discovery import NO_ADMIN, Deployment
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario

NOT_ENABLED = "fga is not enabled on this server"

MODEL = """model
  schema 1.1

type user

type group
  relations
    define member: [user, group#member]

type document
  relations
    define owner: [user]
    define viewer: [user, group#member] or owner
    define can_view: viewer
"""


def engine_on(deployment: Deployment) -> str | None:
    if deployment.fga_enabled is None:
        return f"{NO_ADMIN} (to read whether the authorization engine is on)"
    if not deployment.fga_enabled:
        return "the authorization engine is off on this deployment"
    return None


def engine_off(deployment: Deployment) -> str | None:
    if deployment.fga_enabled is None:
        return f"{NO_ADMIN} (to read whether the authorization engine is on)"
    if deployment.fga_enabled:
        return "the authorization engine is on here (these rows need --fga-store=none)"
    return None


def engine_and_signup(deployment: Deployment) -> str | None:
    return engine_on(deployment) or password_signup(deployment)


def _tuple(user: str, relation: str, obj: str) -> dict[str, str]:
    return {"user": user, "relation": relation, "object": obj}


@scenario("fga.model_tuples_check_list_reset", destructive=True, requires=engine_on)
def model_and_tuples(ctx: Ctx) -> None:
    """Install a model, write tuples, check, list, read page by page, list users, expand,
    refuse reset while tuples exist, delete them, reset."""
    admin = ctx.admin
    model = ctx.expect_ok(ctx.call("fga_write_model", {"dsl": MODEL}, admin))
    ctx.expect(bool(model.get("id")) and "type document" in str(model.get("dsl")), f"{model}")
    ctx.expect_ok(ctx.call("fga_get_model", {}, admin), id=model["id"])
    alice, bob = f"user:{ctx.name('a')}", f"user:{ctx.name('b')}"
    doc, other = f"document:{ctx.name('d')}", f"document:{ctx.name('d')}"
    group = f"group:{ctx.name('g')}"
    tuples = [
        _tuple(alice, "owner", doc),
        _tuple(bob, "member", group),
        _tuple(f"{group}#member", "viewer", doc),
    ]
    ctx.cleanup("fga_delete_tuples", {"tuples": tuples}, admin)
    ctx.expect_ok(ctx.call("fga_write_tuples", {"tuples": tuples}, admin))
    checked = ctx.call(
        "check_permissions",
        {
            "user": bob,
            "checks": [
                {"relation": "can_view", "object": doc},
                {"relation": "owner", "object": doc},
                {"relation": "can_view", "object": other},
                {
                    "relation": "can_view",
                    "object": other,
                    "contextual_tuples": [_tuple(bob, "viewer", other)],
                },
            ],
        },
        admin,
    )
    results = ctx.expect_ok(checked).get("results") or []
    ctx.expect(
        [bool(r.get("allowed")) for r in results] == [True, False, False, True],
        f"check results {results}",
    )
    listed = ctx.expect_ok(
        ctx.call("list_permissions", {"user": alice, "object_type": "document"}, admin)
    )
    ctx.expect(doc in (listed.get("objects") or []), f"list_permissions: {listed}")
    page = ctx.expect_ok(
        ctx.call("fga_read_tuples", {"object": doc, "page_size": 1}, admin, label="read page 1")
    )
    token = page.get("continuation_token")
    ctx.expect(len(page.get("tuples") or []) == 1 and bool(token), f"first page: {page}")
    rest = ctx.expect_ok(
        ctx.call(
            "fga_read_tuples",
            {"object": doc, "page_size": 1, "continuation_token": token},
            admin,
            label="read page 2",
        )
    )
    ctx.expect(len(rest.get("tuples") or []) == 1, f"second page: {rest}")
    users = ctx.expect_ok(
        ctx.call(
            "fga_list_users",
            {"object": doc, "relation": "can_view", "user_type": "user"},
            admin,
        )
    )
    ctx.expect(sorted(users.get("users") or []) == sorted([alice, bob]), f"list_users: {users}")
    tree = ctx.expect_ok(ctx.call("fga_expand", {"object": doc, "relation": "viewer"}, admin))
    ctx.expect(isinstance(json.loads(str(tree.get("tree"))), dict), f"expand: {tree}")
    refused = ctx.call("fga_reset", {}, admin, label="reset while tuples exist")
    ctx.expect_error(refused, "failed_precondition")
    ctx.expect_ok(ctx.call("fga_delete_tuples", {"tuples": tuples}, admin))
    ctx.expect_ok(ctx.call("fga_reset", {}, admin))
    ctx.expect_ok(ctx.call("fga_get_model", {}, admin, label="model after reset"))


@scenario("fga.check_permissions_limits", requires=engine_on)
def check_limits(ctx: Ctx) -> None:
    """Fewer than 1 or more than 100 checks are invalid_argument; no credentials is
    unauthenticated; admin credentials need an explicit user."""
    admin = ctx.admin
    one = [{"relation": "viewer", "object": "document:x"}]
    ctx.expect_error(
        ctx.call("check_permissions", {"user": "user:x", "checks": []}, admin),
        "invalid_argument",
    )
    ctx.expect_error(
        ctx.call("check_permissions", {"user": "user:x", "checks": one * 101}, admin),
        "invalid_argument",
        "too many checks: max 100 per request",
    )
    ctx.expect_error(ctx.call("check_permissions", {"checks": one}), "unauthenticated")
    ctx.expect_error(ctx.call("list_permissions", {}), "unauthenticated")
    ctx.expect_error(ctx.call("check_permissions", {"checks": one}, admin), "invalid_argument")


@scenario("fga.explicit_user_not_permitted", requires=engine_and_signup)
def explicit_user(ctx: Ctx) -> None:
    """A user may not ask about another subject: permission_denied."""
    _, body, _ = new_user(ctx)
    bearer = Credentials(bearer=body["access_token"])
    one = [{"relation": "viewer", "object": "document:x"}]
    other = f"user:{ctx.name('other')}"
    ctx.expect_error(
        ctx.call("check_permissions", {"user": other, "checks": one}, bearer),
        "permission_denied",
    )
    ctx.expect_error(ctx.call("list_permissions", {"user": other}, bearer), "permission_denied")


@scenario("fga.admin_errors", requires=engine_on)
def admin_errors(ctx: Ctx) -> None:
    """Malformed admin requests are invalid_argument; no credentials is unauthenticated."""
    admin = ctx.admin
    ctx.expect_error(ctx.call("fga_write_model", {"dsl": ""}, admin), "invalid_argument")
    ctx.expect_error(
        ctx.call("fga_write_model", {"dsl": "model\n  schema 1.1\ntype"}, admin),
        "invalid_argument",
    )
    ctx.expect_error(
        ctx.call(
            "fga_list_users",
            {"object": "document:x", "relation": "viewer"},
            admin,
            code_only=True,
        ),
        "invalid_argument",
    )
    ctx.expect_error(
        ctx.call("fga_read_tuples", {"continuation_token": "not-a-token"}, admin),
        "invalid_argument",
    )
    ctx.expect_error(ctx.call("fga_get_model"), "unauthenticated")
    ctx.expect_error(
        ctx.call("fga_write_tuples", {"tuples": [_tuple("user:x", "viewer", "document:x")]}),
        "unauthenticated",
    )


@scenario("fga.not_enabled_failed_precondition", requires=engine_off)
def not_enabled(ctx: Ctx) -> None:
    """Without the engine every engine operation is failed_precondition, with the spec's
    message."""
    admin = ctx.admin
    one = [{"relation": "viewer", "object": "document:x"}]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("check_permissions", {"user": "user:x", "checks": one}),
        ("list_permissions", {"user": "user:x"}),
        ("fga_get_model", {}),
        ("fga_write_model", {"dsl": MODEL}),
        ("fga_read_tuples", {}),
        ("fga_reset", {}),
    ]
    for operation, request in calls:
        ctx.expect_error(ctx.call(operation, request, admin), "failed_precondition", NOT_ENABLED)


LIST_MODEL = """model
  schema 1.1

type user

type group
  relations
    define member: [user]

type folder
  relations
    define viewer: [user]

type document
  relations
    define parent: [folder]
    define viewer: [user, user:*, group#member] or viewer from parent
"""


@scenario("fga.list_objects_users_expand", destructive=True, requires=engine_on)
def list_objects_users_expand(ctx: Ctx) -> None:
    """Exact answers of list_permissions, list_users and expand through a wildcard, a
    userset and a tuple-to-userset hop, on every surface."""
    admin = ctx.admin
    ctx.expect_ok(ctx.call("fga_write_model", {"dsl": LIST_MODEL}, admin))
    alice, bob = f"user:{ctx.name('a')}", f"user:{ctx.name('b')}"
    folder, group = f"folder:{ctx.name('f')}", f"group:{ctx.name('g')}"
    by_parent, public, by_group = (f"document:{ctx.name('d')}" for _ in range(3))
    tuples = [
        _tuple(folder, "parent", by_parent),
        _tuple(alice, "viewer", folder),
        _tuple("user:*", "viewer", public),
        _tuple(bob, "member", group),
        _tuple(f"{group}#member", "viewer", by_group),
    ]
    ctx.cleanup("fga_reset", {}, admin)
    ctx.cleanup("fga_delete_tuples", {"tuples": tuples}, admin)
    ctx.expect_ok(ctx.call("fga_write_tuples", {"tuples": tuples}, admin))
    for user, wanted in ((alice, {by_parent, public}), (bob, {by_group, public})):
        listed = ctx.expect_ok(
            ctx.call(
                "list_permissions",
                {"user": user, "object_type": "document", "relation": "viewer"},
                admin,
            )
        )
        ctx.expect(set(listed.get("objects") or []) == wanted, f"{user}: {listed}")
        ctx.expect(not listed.get("truncated"), f"truncated: {listed}")
    for obj, wanted_users in ((by_parent, [alice]), (public, ["user:*"]), (by_group, [bob])):
        users = ctx.expect_ok(
            ctx.call(
                "fga_list_users",
                {"object": obj, "relation": "viewer", "user_type": "user"},
                admin,
            )
        )
        ctx.expect(sorted(users.get("users") or []) == wanted_users, f"{obj}: {users}")
    tree = ctx.expect_ok(ctx.call("fga_expand", {"object": by_group, "relation": "viewer"}, admin))
    text = str(tree.get("tree"))
    ctx.expect(f"{group}#member" in text, f"expand of {by_group} does not name {group}#member")
