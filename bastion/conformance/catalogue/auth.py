"""Sign-up, login, tokens versus cookies, profile, session, logout (issue 3 flows).

Users are uniquely named and removed afterwards: ``delete_user`` when the deployment
offers it, otherwise the user deactivates its own account.
"""

from __future__ import annotations

from typing import Any

from bastion.conformance import mailsink
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.scenario import Ctx, NotOffered, scenario

PASSWORD = "Conf0rmance!pass"
SESSION_COOKIE = "cookie_session"
SIGNER_COOKIE = "bastion_signup"


def _signup_flags(deployment: Deployment) -> str | None:
    for flag in ("is_sign_up_enabled", "is_basic_authentication_enabled"):
        if not deployment.flag(flag):
            return f"{flag} is off on this deployment"
    return None


def signup_signs_in(deployment: Deployment) -> str | None:
    """Password sign-up that signs in at once (the hosted page's form rows)."""
    if deployment.flag("is_email_verification_enabled"):
        return "is_email_verification_enabled: the sign-up page does not sign in"
    return _signup_flags(deployment)


def password_signup(deployment: Deployment) -> str | None:
    """Password sign-up that signs in, at once or through the link mailed to the
    suite's sink (``new_user`` follows it)."""
    reason = _signup_flags(deployment)
    if reason:
        return reason
    if deployment.flag("is_email_verification_enabled") and mailsink.current() is None:
        return (
            "is_email_verification_enabled: sign-up logs in only through the mailed link "
            "(give --mail-sink and point the deployment's mail at it)"
        )
    return None


def signer(signed: Outcome) -> Credentials:
    """The cookie a sign-up answer set for the caller that chose the password (bastion's
    ``bastion_signup``): verifying with it keeps that password."""
    value = signed.cookie(SIGNER_COOKIE)
    return Credentials(cookies=((SIGNER_COOKIE, value),)) if value else Credentials()


def mailed_token(ctx: Ctx, email: str, token_type: str) -> str:
    """The token of the next ``token_type`` link mailed to ``email``."""
    sink = mailsink.current()
    ctx.expect(sink is not None, "the mail sink stopped")
    assert sink is not None
    try:
        return sink.next_token(email, token_type)
    except mailsink.NoMail as exc:
        ctx.expect(False, str(exc))
        raise


def _verified(ctx: Ctx, email: str, signed: Outcome) -> Outcome:
    """With email verification on: follow the mailed sign-up link as the caller that
    signed up, which signs in like a sign-up without verification does."""
    token = mailed_token(ctx, email, "basic_auth_signup")
    return ctx.call("verify_email", {"token": token}, signer(signed))


def remove_user(ctx: Ctx, email: str) -> None:
    """Delete a user the scenario made (or let it deactivate itself: without the admin
    secret, or where the deployment lacks admin user management)."""
    if ctx.deployment.admin_secret is not None:
        try:
            ctx.raw_call("delete_user", {"email": email}, ctx.admin)
        except NotOffered:
            pass
        else:
            return
    login = ctx.raw_call("login", {"email": email, "password": PASSWORD})
    token = login.body.get("access_token") if login.ok else None
    if token:
        ctx.raw_call("deactivate_account", {}, Credentials(bearer=str(token)))


def new_user(ctx: Ctx, **extra: Any) -> tuple[str, dict[str, Any], str]:
    """Sign a unique user up (a compared step); (email, body, session cookie value)."""
    email = ctx.email()
    request = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD, **extra}
    outcome = ctx.call("signup", request)
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    body = ctx.expect_ok(outcome)
    if ctx.deployment.flag("is_email_verification_enabled"):
        outcome = _verified(ctx, email, outcome)
        body = ctx.expect_ok(outcome)
    ctx.expect(bool(body.get("access_token")), f"signup returned no access token: {body}")
    cookie = outcome.cookie(SESSION_COOKIE)
    ctx.expect(cookie is not None, f"signup set no {SESSION_COOKIE} cookie: {outcome.cookies}")
    return email, body, cookie or ""


@scenario("auth.signup_profile_bearer_and_cookie", requires=password_signup)
def signup_profile(ctx: Ctx) -> None:
    """Sign-up logs in; profile answers by bearer token and by session cookie alike."""
    email, body, cookie = new_user(ctx, given_name="Conformance")
    user = body.get("user") or {}
    ctx.expect(user.get("email") == email, f"signup user is {user}")
    by_token = ctx.call("profile", credentials=Credentials(bearer=body["access_token"]))
    ctx.expect_ok(by_token, email=email, given_name="Conformance")
    by_cookie = ctx.call("profile", credentials=Credentials(cookies=((SESSION_COOKIE, cookie),)))
    ctx.expect_ok(by_cookie, email=email)
    ctx.expect_error(ctx.call("profile"), "unauthenticated")
    ctx.expect_error(
        ctx.call("profile", credentials=Credentials(bearer=body["access_token"][:-4] + "AAAA")),
        "unauthenticated",
    )


@scenario("auth.login_validate_session_logout", requires=password_signup)
def login_flow(ctx: Ctx) -> None:
    """Login by password; the token validates; session rotates the cookie; logout ends it."""
    email, _, _ = new_user(ctx)
    wrong = ctx.call("login", {"email": email, "password": PASSWORD + "x"})
    ctx.expect(not wrong.ok, f"a wrong password logged in: {wrong.describe()}")
    login = ctx.call("login", {"email": email, "password": PASSWORD})
    tokens = ctx.expect_ok(login)
    access = str(tokens.get("access_token") or "")
    valid = ctx.call("validate_jwt_token", {"token_type": "access_token", "token": access})
    ctx.expect_ok(valid, is_valid=True)
    cookie = login.cookie(SESSION_COOKIE) or ""
    session = ctx.call("session", credentials=Credentials(cookies=((SESSION_COOKIE, cookie),)))
    ctx.expect_ok(session)
    ctx.expect(session.cookie(SESSION_COOKIE) is not None, "session did not rotate the cookie")
    checked = ctx.call("validate_session", {"cookie": session.cookie(SESSION_COOKIE)})
    ctx.expect_ok(checked, is_valid=True)
    # session rotated the session: its new access token is the live one.
    access = str(session.body.get("access_token") or "")
    ctx.expect_ok(ctx.call("logout", credentials=Credentials(bearer=access)))
    ctx.expect_error(ctx.call("profile", credentials=Credentials(bearer=access)), "unauthenticated")
    ctx.expect_error(ctx.call("logout"), "unauthenticated")


@scenario("auth.signup_refusals", requires=password_signup)
def signup_refusals(ctx: Ctx) -> None:
    """Mismatched passwords and a taken email are refused with invalid_argument."""
    mismatch = ctx.call(
        "signup",
        {"email": ctx.email(), "password": PASSWORD, "confirm_password": PASSWORD + "x"},
    )
    ctx.expect_error(mismatch, "invalid_argument")
    email, _, _ = new_user(ctx)
    again = ctx.call("signup", {"email": email, "password": PASSWORD, "confirm_password": PASSWORD})
    ctx.expect(not again.ok, f"a taken email signed up again: {again.describe()}")


@scenario("auth.update_profile", requires=password_signup)
def update_profile(ctx: Ctx) -> None:
    """update_profile changes the caller's own profile; anonymous callers are refused."""
    _, body, _ = new_user(ctx)
    bearer = Credentials(bearer=body["access_token"])
    ctx.expect_ok(ctx.call("update_profile", {"given_name": "Renamed"}, bearer))
    ctx.expect_ok(ctx.call("profile", credentials=bearer), given_name="Renamed")
    ctx.expect_error(ctx.call("update_profile", {"given_name": "X"}), "unauthenticated")
