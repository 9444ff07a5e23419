"""The second factor: ``verify_otp`` and ``resend_otp``, with their error rows.

Needs a deployment with ``--enable-mfa`` (``is_multi_factor_auth_enabled`` in meta) and
password sign-up that logs in. Each scenario signs a unique user up with MFA on, logs in
and finishes the challenge the login answers with; which method a login gets is the
deployment's choice (emailed codes come before authenticator apps), so a scenario whose
method the deployment does not use skips, saying so. Emailed codes are read from the
suite's own mail sink (``--mail-sink``); authenticator codes are computed with pyotp
from the secret the enrolment shows.
"""

from __future__ import annotations

import time

import pyotp

from bastion.conformance import mailsink
from bastion.conformance.catalogue.auth import (
    PASSWORD,
    SESSION_COOKIE,
    password_signup,
    remove_user,
)
from bastion.conformance.catalogue.mail import NO_SINK
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.scenario import Ctx, scenario

MFA_COOKIE = "mfa"
INVALID_SESSION = "invalid session"
INVALID_OTP = "invalid otp"
IDENTIFIER_REQUIRED = "email or phone number is required"
#: What an enrolment shows differs per user: compared by presence, not value.
ENROLMENT = frozenset(
    {"authenticator_scanner_image", "authenticator_secret", "authenticator_recovery_codes"}
)


def mfa_on(deployment: Deployment) -> str | None:
    return deployment.needs_flag("is_multi_factor_auth_enabled") or password_signup(deployment)


def mfa_and_mail(deployment: Deployment) -> str | None:
    if mailsink.current() is None:
        return NO_SINK
    return mfa_on(deployment)


def challenged(ctx: Ctx, screen: str, other: str) -> tuple[str, Outcome]:
    """A new MFA user's password login: (email, the challenge answer). Skips when the
    deployment challenges by another method (``other`` screen)."""
    email = ctx.email()
    request = {
        "email": email,
        "password": PASSWORD,
        "confirm_password": PASSWORD,
        "is_multi_factor_auth_enabled": True,
    }
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    ctx.expect_ok(ctx.call("signup", request))
    login = ctx.call("login", {"email": email, "password": PASSWORD})
    body = ctx.expect_ok(login)
    if body.get(other):
        ctx.skip(f"this deployment challenges by {other.removeprefix('should_show_')}")
    screens = [k for k, v in body.items() if k.startswith("should_show_") and v is True]
    if not screens and body.get("access_token"):
        ctx.skip("this deployment has no second factor for an email login (no email code, no app)")
    ctx.expect(body.get(screen) is True, f"login did not ask for {screen} but {screens}")
    ctx.expect(not body.get("access_token"), "a challenged login returned tokens")
    ctx.expect(login.cookie(MFA_COOKIE) is not None, f"no {MFA_COOKIE} cookie: {login.cookies}")
    return email, login


def with_mfa(value: str | None) -> Credentials:
    return Credentials(cookies=((MFA_COOKIE, value or ""),))


def expect_signed_in(ctx: Ctx, outcome: Outcome, email: str) -> None:
    body = ctx.expect_ok(outcome, message="OTP verified successfully.")
    ctx.expect(bool(body.get("access_token")), f"verify_otp returned no access token: {body}")
    ctx.expect((body.get("user") or {}).get("email") == email, f"signed in as {body.get('user')}")
    ctx.expect(outcome.cookie(SESSION_COOKIE) is not None, f"no session cookie: {outcome.cookies}")


@scenario("mfa.email_otp_verify_and_resend", requires=mfa_and_mail)
def email_otp(ctx: Ctx) -> None:
    """An emailed code completes the login once; the challenge is checked before the
    code (no cookie, another identifier); wrong codes are invalid_argument; a resend
    right away is resource_exhausted."""
    email, login = challenged(ctx, "should_show_email_otp_screen", "should_show_totp_screen")
    cookie = with_mfa(login.cookie(MFA_COOKIE))
    sink = mailsink.current()
    ctx.expect(sink is not None, "the mail sink stopped")
    assert sink is not None
    try:
        code = sink.next_code(email)
    except mailsink.NoMail as exc:
        ctx.expect(False, str(exc))
        raise
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    request = {"email": email, "otp": code}
    ctx.expect_error(ctx.call("verify_otp", request), "unauthenticated", INVALID_SESSION)
    ctx.expect_error(ctx.call("verify_otp", {"otp": code}, cookie), "invalid_argument")
    other = ctx.call("verify_otp", {**request, "email": ctx.email()}, cookie)
    ctx.expect_error(other, "unauthenticated", INVALID_SESSION)
    ctx.expect_error(
        ctx.call("verify_otp", {**request, "otp": wrong}, cookie), "invalid_argument", INVALID_OTP
    )
    too_soon = ctx.call("resend_otp", {"email": email}, cookie)
    ctx.expect_error(too_soon, "resource_exhausted")
    ctx.expect_error(ctx.call("resend_otp", {"email": email}), "unauthenticated", INVALID_SESSION)
    ctx.expect_error(ctx.call("resend_otp", {}, cookie), "invalid_argument", IDENTIFIER_REQUIRED)
    done = ctx.call("verify_otp", request, cookie)
    expect_signed_in(ctx, done, email)
    ctx.expect_error(ctx.call("verify_otp", request, cookie), "unauthenticated", INVALID_SESSION)


@scenario("mfa.totp_enrol_and_verify", requires=mfa_on, volatile=ENROLMENT)
def totp_enrolment(ctx: Ctx) -> None:
    """A first login enrols an authenticator app; its code (pyotp) completes the login
    once; wrong codes are invalid_argument; authenticator codes cannot be resent."""
    email, login = challenged(ctx, "should_show_totp_screen", "should_show_email_otp_screen")
    secret = str(login.body.get("authenticator_secret") or "")
    ctx.expect(bool(secret), f"no authenticator secret in the enrolment: {login.body}")
    codes = login.body.get("authenticator_recovery_codes") or []
    ctx.expect(len(codes) == 10, f"expected 10 recovery codes, got {len(codes)}")
    cookie = with_mfa(login.cookie(MFA_COOKIE))
    code = pyotp.TOTP(secret).at(time.time())
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    request = {"email": email, "otp": code, "is_totp": True}
    ctx.expect_error(ctx.call("verify_otp", request), "unauthenticated", INVALID_SESSION)
    ctx.expect_error(
        ctx.call("verify_otp", {**request, "otp": wrong}, cookie), "invalid_argument", INVALID_OTP
    )
    resend = ctx.call("resend_otp", {"email": email}, cookie)
    ctx.expect_error(resend, "failed_precondition")
    done = ctx.call("verify_otp", request, cookie)
    expect_signed_in(ctx, done, email)
    ctx.expect_error(ctx.call("verify_otp", request, cookie), "unauthenticated", INVALID_SESSION)
