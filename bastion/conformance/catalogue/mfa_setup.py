"""MFA enrolment from a parked login (Authorizer's newer API): ``email_otp_mfa_setup``,
``totp_mfa_setup``, ``skip_mfa_setup`` and ``lock_mfa``, with their error rows.

The rows need what the ``mfa.*`` rows need (see :mod:`conformance.catalogue.mfa`): the
``mfa.email_*`` row the ``mfa-email`` profile (emailed codes, the suite's mail sink), the
``mfa.totp_*`` rows the ``mfa-totp`` profile (authenticator apps only, so no code can be
sent and locking is allowed). Each signs its own users up with MFA on and unenforced.
"""

from __future__ import annotations

import time

import pyotp

from bastion.conformance import mailsink
from bastion.conformance.catalogue.auth import PASSWORD
from bastion.conformance.catalogue.mfa import (
    ENROLMENT,
    IDENTIFIER_REQUIRED,
    INVALID_SESSION,
    MFA_COOKIE,
    challenged,
    expect_signed_in,
    mfa_and_mail,
    mfa_on,
    with_mfa,
)
from bastion.conformance.scenario import Ctx, scenario

EMAIL_OTP_SENT = "Please check email inbox for the OTP"
SKIPPED = "MFA setup skipped"
LOCKED = "multi-factor authentication locked; contact your administrator to regain access"
LOGIN_LOCKED = (
    "your account's multi-factor authentication is locked; "
    "contact your administrator to regain access"
)
SETUP_FIELDS = ("should_offer_email_otp_mfa_setup", "should_offer_sms_otp_mfa_setup")


def enrolled(ctx: Ctx, email: str) -> list[str]:
    """The user's ``enrolled_mfa_methods`` as the admin reads it (compared by that key)."""
    found = ctx.call("user", {"email": email}, ctx.admin, only=("enrolled_mfa_methods",))
    return list(ctx.expect_ok(found).get("enrolled_mfa_methods") or [])


@scenario("mfa.email_otp_setup", requires=mfa_and_mail)
def email_otp_setup(ctx: Ctx) -> None:
    """A parked login offers emailed codes; ``email_otp_mfa_setup`` (the mfa cookie)
    sends a new code whose ``verify_otp`` signs in and enrols ``email_otp``; with a code
    to send, ``lock_mfa`` is refused; no cookie or no identifier is refused."""
    email, login = challenged(ctx, "should_show_email_otp_screen", "should_show_totp_screen")
    ctx.expect(login.body.get(SETUP_FIELDS[0]) is True, f"no email setup offer: {login.body}")
    cookie = with_mfa(login.cookie(MFA_COOKIE))
    sink = mailsink.current()
    ctx.expect(sink is not None, "the mail sink stopped")
    assert sink is not None
    sink.next_code(email)  # the login's own code
    request = {"email": email}
    no_cookie = ctx.call("email_otp_mfa_setup", request)
    ctx.expect_error(no_cookie, "unauthenticated", INVALID_SESSION)
    nobody = ctx.call("email_otp_mfa_setup", {}, cookie)
    ctx.expect_error(nobody, "invalid_argument", IDENTIFIER_REQUIRED)
    ctx.expect_error(ctx.call("lock_mfa", request, cookie), "failed_precondition")
    ctx.expect_error(ctx.call("skip_mfa_setup", {"email": ctx.email()}, cookie), "unauthenticated")
    sent = ctx.call("email_otp_mfa_setup", request, cookie)
    ctx.expect_ok(sent, message=EMAIL_OTP_SENT)
    next_cookie = with_mfa(sent.cookie(MFA_COOKIE))
    code = sink.next_code(email)
    done = ctx.call("verify_otp", {"email": email, "otp": code}, next_cookie)
    expect_signed_in(ctx, done, email)
    ctx.expect(enrolled(ctx, email) == ["email_otp"], "email_otp was not enrolled")


@scenario("mfa.totp_setup", requires=mfa_on, volatile=ENROLMENT)
def totp_setup(ctx: Ctx) -> None:
    """``totp_mfa_setup`` from a parked login shows an enrolment; its first code signs
    in and enrols ``totp``; the old challenge is gone."""
    email, login = challenged(ctx, "should_show_totp_screen", "should_show_email_otp_screen")
    cookie = with_mfa(login.cookie(MFA_COOKIE))
    shown = ctx.call("totp_mfa_setup", {"email": email}, cookie)
    body = ctx.expect_ok(shown, should_show_totp_screen=True)
    secret = str(body.get("authenticator_secret") or "")
    ctx.expect(bool(secret), f"no authenticator secret in the enrolment: {body}")
    ctx.expect_error(ctx.call("totp_mfa_setup", {"email": email}, cookie), "unauthenticated")
    code = pyotp.TOTP(secret).at(time.time())
    done = ctx.call(
        "verify_otp",
        {"email": email, "otp": code, "is_totp": True},
        with_mfa(shown.cookie(MFA_COOKIE)),
    )
    expect_signed_in(ctx, done, email)
    ctx.expect(enrolled(ctx, email) == ["totp"], "totp was not enrolled")


@scenario("mfa.totp_skip_setup", requires=mfa_on, volatile=ENROLMENT)
def skip_setup(ctx: Ctx) -> None:
    """An unenforced offer may be skipped: tokens now, ``has_skipped_mfa_setup_at``
    recorded, and the next login asks no second factor."""
    email, login = challenged(ctx, "should_show_totp_screen", "should_show_email_otp_screen")
    skipped = ctx.call("skip_mfa_setup", {"email": email}, with_mfa(login.cookie(MFA_COOKIE)))
    body = ctx.expect_ok(skipped, message=SKIPPED)
    ctx.expect(bool(body.get("access_token")), f"skip_mfa_setup gave no tokens: {body}")
    ctx.expect(bool((body.get("user") or {}).get("has_skipped_mfa_setup_at")), "not recorded")
    again = ctx.call("login", {"email": email, "password": PASSWORD})
    ctx.expect(bool(ctx.expect_ok(again).get("access_token")), "the next login was challenged")


@scenario("mfa.totp_lock", requires=mfa_on, volatile=ENROLMENT)
def lock(ctx: Ctx) -> None:
    """With no code to send, ``lock_mfa`` locks the account: later logins are refused
    after the password until an admin's ``reset_mfa``."""
    email, login = challenged(ctx, "should_show_totp_screen", "should_show_email_otp_screen")
    locked = ctx.call("lock_mfa", {"email": email}, with_mfa(login.cookie(MFA_COOKIE)))
    ctx.expect_ok(locked, message=LOCKED)
    refused = ctx.call("login", {"email": email, "password": PASSWORD})
    ctx.expect_error(refused, "failed_precondition", LOGIN_LOCKED)
    found = ctx.expect_ok(ctx.call("user", {"email": email}, ctx.admin, only=("email",)))
    reset = {"id": str(found.get("id") or ""), "reset_mfa": True}
    ctx.expect_ok(ctx.call("update_user", reset, ctx.admin, only=("email",)))
    unlocked = ctx.call("login", {"email": email, "password": PASSWORD})
    ctx.expect_ok(unlocked, should_show_totp_screen=True)
