"""The hosted login pages (``/app``) over plain HTML forms, as a browser without
JavaScript uses them: sign up, the signed-in page, sign out, sign in again; a form post
without the page's CSRF token changes nothing. HTTP only: n/a on GraphQL and gRPC."""

from __future__ import annotations

import html

from bastion.conformance.catalogue.auth import PASSWORD, remove_user, signup_signs_in
from bastion.conformance.scenario import Ctx, scenario
from bastion.conformance.web import Browser, hidden_fields, redirect_target


def _form(ctx: Ctx, browser: Browser, path: str) -> dict[str, str]:
    page = browser.get(path)
    if page.status_code == 404:
        ctx.skip("the hosted login page is off on this deployment (--enable-login-page)")
    ctx.expect(page.status_code == 200, f"GET {path}: HTTP {page.status_code}")
    fields = hidden_fields(page.text)
    ctx.expect("csrf_token" in fields, f"the form at {path} carries no csrf_token")
    return fields


def _signed_in_as(ctx: Ctx, browser: Browser, email: str) -> None:
    page = browser.get("/app/profile")
    ctx.expect(page.status_code == 200, f"GET /app/profile: HTTP {page.status_code}")
    ctx.expect(html.escape(email) in page.text, "the signed-in page does not name the user")


@scenario("pages.signup_profile_logout_login", surfaces=("rest",), requires=signup_signs_in)
def pages_flow(ctx: Ctx) -> None:
    """Sign up through the form, see the signed-in page, sign out, sign in through the
    form; a post without the CSRF token is refused and signs nobody in."""
    browser = ctx.browser()
    email = ctx.email()
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    fields = _form(ctx, browser, "/app/signup")
    forged = browser.post(
        "/app/signup",
        data={"email": email, "password": PASSWORD, "confirm_password": PASSWORD},
    )
    ctx.expect(forged.status_code == 403, f"a form without its token: HTTP {forged.status_code}")
    signup = {**fields, "email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    created = browser.post("/app/signup", data=signup)
    target, _ = redirect_target(created)
    ctx.expect(target.endswith("/app/profile"), f"sign-up sent the browser to {target}")
    _signed_in_as(ctx, browser, email)
    fields = hidden_fields(browser.get("/app/profile").text)
    out = browser.post("/app/logout", data=fields)
    ctx.expect(out.status_code == 200, f"sign out: HTTP {out.status_code}")
    after = browser.get("/app/profile")
    target, _ = redirect_target(after)
    ctx.expect(target.endswith("/app"), f"signed out, /app/profile sent to {target}")
    fields = _form(ctx, browser, "/app")
    wrong = browser.post("/app", data={**fields, "identifier": email, "password": "x" + PASSWORD})
    ctx.expect(wrong.status_code == 401, f"a wrong password: HTTP {wrong.status_code}")
    target, _ = redirect_target(browser.get("/app/profile"))
    ctx.expect(target.endswith("/app"), "a wrong password signed the browser in")
    login = browser.post("/app", data={**fields, "identifier": email, "password": PASSWORD})
    target, _ = redirect_target(login)
    ctx.expect(target.endswith("/app/profile"), f"sign-in sent the browser to {target}")
    _signed_in_as(ctx, browser, email)


@scenario("pages.sessions_sign_out_another_device", surfaces=("rest",), requires=signup_signs_in)
def pages_sessions(ctx: Ctx) -> None:
    """Signed in through the pages in two browsers (on two instances where there are
    several), the first lists both at ``/app/sessions`` and signs the other out with the
    page's form: the other browser is signed out at once, the first is not."""
    laptop, phone = ctx.browser(), ctx.browser(1)
    email = ctx.email()
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    fields = _form(ctx, laptop, "/app/signup")
    signup = {**fields, "email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    target, _ = redirect_target(laptop.post("/app/signup", data=signup))
    ctx.expect(target.endswith("/app/profile"), f"sign-up sent the browser to {target}")
    fields = _form(ctx, phone, "/app")
    login = phone.post("/app", data={**fields, "identifier": email, "password": PASSWORD})
    target, _ = redirect_target(login)
    ctx.expect(target.endswith("/app/profile"), f"sign-in sent the browser to {target}")
    page = laptop.get("/app/sessions")
    ctx.expect(page.status_code == 200, f"GET /app/sessions: HTTP {page.status_code}")
    forms = page.text.count('action="/app/sessions/revoke"')
    ctx.expect(forms == 1, f"{forms} sign-out forms for one other session")
    out = laptop.post("/app/sessions/revoke", data=hidden_fields(page.text))
    ctx.expect(out.status_code == 200, f"signing the other session out: HTTP {out.status_code}")
    target, _ = redirect_target(phone.get("/app/profile"))
    ctx.expect(target.endswith("/app"), f"the signed-out browser's profile sent to {target}")
    _signed_in_as(ctx, laptop, email)
