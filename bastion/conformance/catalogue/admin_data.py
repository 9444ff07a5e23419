"""Admin data operations (issue 6): webhooks with a receiver the suite starts, email
templates, audit logs, and their pagination. Data is uniquely named and deleted."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time

from bastion.conformance.catalogue.auth import PASSWORD, new_user, password_signup
from bastion.conformance.outcome import Outcome
from bastion.conformance.receiver import ANSWER, receiver
from bastion.conformance.scenario import Ctx, Failure, NotOffered, scenario

#: How bastion refuses a webhook target by its address (``--webhook-allow-private-targets``
#: off): "invalid endpoint: 127.0.0.1 is a loopback address", "... resolves to a private
#: address (10.0.0.7)", and so on for every class of address it will not call.
TARGET_REFUSAL = re.compile(
    r"\b(?:is|resolves to) an? (?:loopback|link-local|private|not routable|not public) address"
)


def skip_refused_target(ctx: Ctx, answer: Outcome) -> None:
    """Skip the row, quoting the deployment, when it refused the suite's receiver for
    its address; any other answer is the row's to judge."""
    refused = answer.code == "invalid_argument" and TARGET_REFUSAL.search(answer.message)
    if not answer.ok and refused:
        ctx.skip(
            "the deployment refuses the suite's receiver as a webhook target "
            f"(start it with --webhook-allow-private-targets=true): {answer.message}"
        )


def _webhook_id(ctx: Ctx, endpoint: str) -> str:
    """The id of the webhook at ``endpoint`` (listing is not compared: it is shared)."""
    listing = ctx.raw_call("webhooks", {"pagination": {"page": 1, "limit": 100}}, ctx.admin)
    ctx.expect(listing.ok, f"webhooks: {listing.describe()}")
    for hook in listing.body.get("webhooks") or []:
        if hook.get("endpoint") == endpoint:
            return str(hook["id"])
    raise Failure(f"the new webhook at {endpoint} is not listed")


@scenario("admin.webhooks_crud_and_pagination")
def webhooks_crud(ctx: Ctx) -> None:
    """Add a (disabled) webhook, read it back, page the list, update it, delete it."""
    admin = ctx.admin
    endpoint = f"https://{ctx.name('host')}.invalid/hook"
    headers = {"x-conformance": ctx.name("h")}
    added = ctx.call(
        "add_webhook",
        {"event_name": "user.login", "endpoint": endpoint, "enabled": False, "headers": headers},
        admin,
    )
    ctx.expect_ok(added)
    hook_id = _webhook_id(ctx, endpoint)
    ctx.cleanup("delete_webhook", {"id": hook_id}, admin)
    got = ctx.expect_ok(ctx.call("webhook", {"id": hook_id}, admin), endpoint=endpoint)
    ctx.expect(got.get("headers") == headers, f"headers came back as {got.get('headers')}")
    page = ctx.expect_ok(
        ctx.call("webhooks", {"pagination": {"page": 1, "limit": 1}}, admin, label="page of 1")
    )
    pagination = page.get("pagination") or {}
    ctx.expect(
        len(page.get("webhooks") or []) == 1 and pagination.get("limit") == 1,
        f"a page of 1: {page}",
    )
    ctx.expect_ok(
        ctx.call("update_webhook", {"id": hook_id, "event_description": "changed"}, admin)
    )
    ctx.expect_ok(ctx.call("webhook", {"id": hook_id}, admin), event_description="changed")
    ctx.expect_ok(ctx.call("delete_webhook", {"id": hook_id}, admin))
    ctx.expect_error(ctx.call("webhook", {"id": hook_id}, admin), "not_found")


@scenario("admin.webhook_refusals")
def webhook_refusals(ctx: Ctx) -> None:
    """Unknown events, bad pagination and missing ids are refused alike; no admin, no access."""
    admin = ctx.admin
    endpoint = f"https://{ctx.name('host')}.invalid/hook"
    unknown = {"event_name": "no.such_event", "endpoint": endpoint, "enabled": False}
    ctx.expect_error(ctx.call("add_webhook", unknown, admin), "invalid_argument")
    ctx.expect_error(
        ctx.call("webhooks", {"pagination": {"page": 1, "limit": 101}}, admin),
        "invalid_argument",
    )
    ctx.expect_error(ctx.call("webhook", {"id": ctx.name("missing")}, admin), "not_found")
    ctx.expect_error(ctx.call("webhooks", {}), "unauthenticated")


@scenario("admin.pagination_zero_values")
def pagination_zero(ctx: Ctx) -> None:
    """page 0 and limit 0 are invalid_argument (REST and GraphQL; proto3 cannot send a 0)."""
    for pagination in ({"page": 0, "limit": 10}, {"page": 1, "limit": 0}):
        ctx.expect_error(
            ctx.call("webhooks", {"pagination": pagination}, ctx.admin), "invalid_argument"
        )


@scenario("admin.test_endpoint_receiver")
def test_endpoint(ctx: Ctx) -> None:
    """test_endpoint POSTs a signed sample event to the suite's own receiver and returns
    its answer (needs --webhook-allow-private-targets on a local deployment)."""
    sink = receiver(advertised=ctx.deployment.receiver_host)
    path = ctx.name("hook")
    request = {"event_name": "user.login", "endpoint": sink.url(path), "headers": {"x-c": path}}
    skip_refused_target(ctx, ctx.raw_call("test_endpoint", request, ctx.admin))
    answer = ctx.call("test_endpoint", request, ctx.admin)
    body = ctx.expect_ok(answer, http_status=200, response=ANSWER.decode())
    ctx.expect(body.get("http_status") == 200, f"{body}")
    hits = [r for r in sink.received if r.path.endswith(path)]
    ctx.expect(len(hits) == 2, f"the receiver got {len(hits)} posts for {path}")
    event = json.loads(hits[-1].body)
    ctx.expect(
        event.get("event_name") == "user.login" and hits[-1].headers.get("x-c") == path,
        f"delivered {event} with headers {hits[-1].headers}",
    )


@scenario("admin.email_templates_crud", destructive=True)
def email_templates(ctx: Ctx) -> None:
    """Add, list, update and delete an email template (global: replaces a mail for all),
    for an event that has no template yet; a second one for the event is already_exists."""
    admin = ctx.admin
    listing = ctx.raw_call("email_templates", {"pagination": {"limit": 100}}, admin)
    taken = {t.get("event_name") for t in listing.body.get("email_templates") or []}
    free = [e for e in TEMPLATE_EVENTS if e not in taken]
    if not free:
        ctx.skip("every email event already has a template on this deployment")
    subject = f"Conformance {ctx.name('s')}"
    request = {"event_name": free[0], "subject": subject, "template": "<p>{{.user.email}}</p>"}
    ctx.cleanups.append(lambda: _delete_template(ctx, subject))
    ctx.expect_ok(ctx.call("add_email_template", request, admin))
    template_id = _template_id(ctx, subject)
    ctx.expect_error(
        ctx.call("add_email_template", request, admin, label="a second template, same event"),
        "already_exists",
    )
    ctx.expect_ok(
        ctx.call("update_email_template", {"id": template_id, "subject": subject + "!"}, admin)
    )
    ctx.expect_ok(ctx.call("delete_email_template", {"id": template_id}, admin))
    ctx.expect_error(ctx.call("delete_email_template", {"id": template_id}, admin), "not_found")


TEMPLATE_EVENTS = ("invite_member", "magic_link_login", "forgot_password", "basic_auth_signup")


def _template_id(ctx: Ctx, subject: str) -> str:
    listing = ctx.raw_call("email_templates", {"pagination": {"limit": 100}}, ctx.admin)
    for template in listing.body.get("email_templates") or []:
        if str(template.get("subject", "")).startswith(subject):
            return str(template["id"])
    raise Failure(f"no template with subject {subject} is listed: {listing.describe()}")


def _delete_template(ctx: Ctx, subject: str) -> None:
    ctx.raw_call("delete_email_template", {"id": _template_id(ctx, subject)}, ctx.admin)


@scenario("admin.audit_logs_filters")
def audit_logs(ctx: Ctx) -> None:
    """Audit logs page and filter; a filter nobody matches is an empty page."""
    admin = ctx.admin
    empty = ctx.expect_ok(ctx.call("audit_logs", {"actor_id": ctx.name("nobody")}, admin))
    ctx.expect(not empty.get("audit_logs"), f"an unmatched filter listed rows: {empty}")
    page = ctx.raw_call("audit_logs", {"pagination": {"page": 1, "limit": 2}}, admin)
    ctx.expect(page.ok and len(page.body.get("audit_logs") or []) <= 2, page.describe())
    ctx.expect_error(ctx.call("audit_logs", {}), "unauthenticated")


@scenario("admin.pagination_far_past_the_end")
def pagination_far(ctx: Ctx) -> None:
    """A page far past the end is an empty page (as /openapi.json documents), not an error;
    a page whose offset would not fit a 64-bit integer is refused as invalid."""
    far = {"pagination": {"page": 1_000_000_000, "limit": 100}}
    huge = {"pagination": {"page": 2**62, "limit": 10}}
    for operation, key in (
        ("webhooks", "webhooks"),
        ("email_templates", "email_templates"),
        ("audit_logs", "audit_logs"),
        ("users", "users"),
        ("verification_requests", "verification_requests"),
    ):
        try:
            body = ctx.expect_ok(ctx.call(operation, far, ctx.admin))
        except NotOffered:
            continue
        ctx.expect(not body.get(key), f"{operation}: a page past the end listed {body}")
        ctx.expect_error(ctx.call(operation, huge, ctx.admin), "invalid_argument")


@scenario("webhooks.event_delivery_signed")
def event_delivery(ctx: Ctx) -> None:
    """A real event (a login) reaches a webhook at the suite's own receiver, signed with
    the client secret over ``<timestamp>.<body>`` (needs --webhook-allow-private-targets on
    a deployment that reaches the suite on a private address, and --client-secret)."""
    secret = ctx.deployment.client_secret
    if not secret:
        ctx.skip("needs --client-secret: webhooks are signed with it")
    reason = password_signup(ctx.deployment)
    if reason:
        ctx.skip(reason)
    sink = receiver(advertised=ctx.deployment.receiver_host)
    path = ctx.name("delivery")
    request = {"event_name": "user.login", "endpoint": sink.url(path), "enabled": True}
    added = ctx.raw_call("add_webhook", request, ctx.admin)
    skip_refused_target(ctx, added)
    ctx.expect(added.ok, f"add_webhook: {added.describe()}")
    ctx.cleanup("delete_webhook", {"id": _webhook_id(ctx, sink.url(path))}, ctx.admin)
    # Each instance keeps its list of listeners for up to a second.
    time.sleep(1.2)
    email, _, _ = new_user(ctx)
    ctx.expect_ok(ctx.call("login", {"email": email, "password": PASSWORD}))
    hits = sink.wait_for(path)
    ctx.expect(bool(hits), f"no webhook delivery reached the receiver at {path} in 30 s")
    events = [(hit, json.loads(hit.body)) for hit in hits]
    mine = [(h, e) for h, e in events if (e.get("user") or {}).get("email") == email]
    ctx.expect(bool(mine), f"no delivered user.login names {email}")
    hit, event = mine[0]
    ctx.expect(event.get("event_name") == "user.login", f"delivered {event.get('event_name')}")
    stamp = hit.headers.get("x-authorizer-timestamp", "")
    wanted = hmac.new(secret.encode(), stamp.encode() + b"." + hit.body, hashlib.sha256)
    signature = hit.headers.get("x-authorizer-signature", "")
    ctx.expect(
        hmac.compare_digest(signature, wanted.hexdigest()),
        "the X-Authorizer-Signature does not verify with the client secret",
    )
    ctx.expect(stamp.isdigit() and abs(time.time() - int(stamp)) < 300, f"timestamp {stamp}")
