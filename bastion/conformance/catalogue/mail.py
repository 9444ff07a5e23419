"""Emailed links: sign-up verification, resend, magic link, password reset, invitations.

These rows need the suite's own SMTP sink (``--mail-sink HOST:PORT``) and a deployment
that sends its mail there; without a sink they are skipped by name. Each scenario takes
the token out of the mail its own unique user received and hands it back through the
surface under test, so every surface proves the whole round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bastion.conformance import mailsink
from bastion.conformance.catalogue.auth import (
    PASSWORD,
    SESSION_COOKIE,
    mailed_token,
    remove_user,
    signer,
)
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.scenario import Ctx, scenario

NEW_PASSWORD = "Conf0rmance!reset"
NO_SINK = (
    "no --mail-sink given: email rows need the deployment's --smtp-host/--smtp-port "
    "pointed at the suite's own sink"
)


def needs_mail(*flags: str) -> Callable[[Deployment], str | None]:
    def requires(deployment: Deployment) -> str | None:
        if mailsink.current() is None:
            return NO_SINK
        for flag in flags:
            if not deployment.flag(flag):
                return f"{flag} is off on this deployment"
        return None

    return requires


def forged(token: str) -> str:
    """The token with its signature broken."""
    return token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")


def signup(ctx: Ctx) -> tuple[str, Outcome]:
    """Sign a unique user up by password (removed afterwards); (email, answer)."""
    email = ctx.email()
    request = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    outcome = ctx.call("signup", request)
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    ctx.expect_ok(outcome)
    return email, outcome


def verify(ctx: Ctx, token: str, credentials: Credentials | None = None) -> dict[str, Any]:
    """verify_email signs in: tokens and the session cookie."""
    outcome = ctx.call("verify_email", {"token": token}, credentials or Credentials())
    body = ctx.expect_ok(outcome)
    ctx.expect(bool(body.get("access_token")), f"verify_email returned no access token: {body}")
    ctx.expect(
        outcome.cookie(SESSION_COOKIE) is not None,
        f"verify_email set no {SESSION_COOKIE} cookie: {outcome.cookies}",
    )
    return body


def login(ctx: Ctx, email: str, password: str) -> Outcome:
    return ctx.call("login", {"email": email, "password": password})


def reset(ctx: Ctx, token: str, password: str, confirm: str | None = None) -> Outcome:
    request = {"token": token, "password": password, "confirm_password": confirm or password}
    return ctx.call("reset_password", request)


_VERIFICATION = ("is_email_verification_enabled", "is_sign_up_enabled")
_BASIC = "is_basic_authentication_enabled"


@scenario("mail.signup_verify_email", requires=needs_mail(*_VERIFICATION, _BASIC))
def signup_verify_email(ctx: Ctx) -> None:
    """Sign-up mails a link and does not log in; a resend replaces the link (the old one
    stops working); the new token verifies once and signs in; followed by the caller that
    signed up (its signer cookie), the password chosen at sign-up stays."""
    email, signed = signup(ctx)
    ctx.expect(not signed.body.get("access_token"), "sign-up logged in although verification is on")
    early = login(ctx, email, PASSWORD)
    ctx.expect(not early.ok, f"login before verification succeeded: {early.describe()}")
    first = mailed_token(ctx, email, "basic_auth_signup")
    request = {"email": email, "identifier": "basic_auth_signup"}
    ctx.expect_ok(ctx.call("resend_verify_email", request))
    token = mailed_token(ctx, email, "basic_auth_signup")
    ctx.expect_error(ctx.call("verify_email", {"token": first}), "invalid_argument")
    ctx.expect_error(ctx.call("verify_email", {"token": forged(token)}), "invalid_argument")
    ctx.expect_error(ctx.call("verify_email", {"token": ""}), "invalid_argument")
    body = verify(ctx, token, signer(signed))
    profile = ctx.call("profile", credentials=Credentials(bearer=str(body["access_token"])))
    ctx.expect_ok(profile, email=email, email_verified=True)
    ctx.expect_error(ctx.call("verify_email", {"token": token}), "invalid_argument")
    ctx.expect_ok(login(ctx, email, PASSWORD))


@scenario("mail.signup_verified_elsewhere", requires=needs_mail(*_VERIFICATION, _BASIC))
def signup_verified_elsewhere(ctx: Ctx) -> None:
    """A sign-up link followed by anyone but the caller that signed up proves the address,
    not that its owner chose the password: the link signs in, the password chosen at
    sign-up no longer does (a stranger may have signed up with the address); a reset
    sets the owner's own."""
    email, _ = signup(ctx)
    body = verify(ctx, mailed_token(ctx, email, "basic_auth_signup"))
    profile = ctx.call("profile", credentials=Credentials(bearer=str(body["access_token"])))
    ctx.expect_ok(profile, email=email, email_verified=True)
    ctx.expect_error(login(ctx, email, PASSWORD), "unauthenticated")
    ctx.expect_ok(ctx.call("forgot_password", {"email": email}))
    ctx.expect_ok(reset(ctx, mailed_token(ctx, email, "forgot_password"), NEW_PASSWORD))
    ctx.expect_ok(login(ctx, email, NEW_PASSWORD))


@scenario("mail.resend_verify_email", requires=needs_mail(*_VERIFICATION, _BASIC))
def resend_verify_email(ctx: Ctx) -> None:
    """Resend answers an unknown address as it answers a pending one (the round trip of
    a resent link is in mail.signup_verify_email); bad identifiers and addresses are
    invalid_argument."""
    email, _ = signup(ctx)
    request = {"email": email, "identifier": "basic_auth_signup"}
    resent = ctx.expect_ok(ctx.call("resend_verify_email", request))
    unknown = ctx.call("resend_verify_email", {**request, "email": ctx.email()})
    ctx.expect_ok(unknown, message=resent.get("message"))
    bad = ctx.call("resend_verify_email", {**request, "identifier": "not_an_identifier"})
    ctx.expect_error(bad, "invalid_argument")
    malformed = ctx.call("resend_verify_email", {**request, "email": "not-an-email"})
    ctx.expect_error(malformed, "invalid_argument")


_MAGIC_LINK = ("is_magic_link_login_enabled", "is_sign_up_enabled")


@scenario("mail.magic_link_login", requires=needs_mail(*_MAGIC_LINK))
def magic_link_login(ctx: Ctx) -> None:
    """A magic link for a new address makes the account; its token signs in once."""
    email = ctx.email()
    sent = ctx.call("magic_link_login", {"email": email})
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    ctx.expect_ok(sent)
    token = mailed_token(ctx, email, "magic_link_login")
    body = verify(ctx, token)
    profile = ctx.call("profile", credentials=Credentials(bearer=str(body["access_token"])))
    ctx.expect_ok(profile, email=email, email_verified=True)
    ctx.expect_error(ctx.call("verify_email", {"token": token}), "invalid_argument")
    ctx.expect_error(ctx.call("magic_link_login", {"email": "not-an-email"}), "invalid_argument")


@scenario("mail.forgot_reset_password", requires=needs_mail("is_sign_up_enabled", _BASIC))
def forgot_reset_password(ctx: Ctx) -> None:
    """forgot_password mails a reset link (unknown addresses get the same answer); its
    token sets the new password once (and proves the address: an unverified user can
    then log in); mismatches and forged tokens are refused."""
    email, _ = signup(ctx)
    sent = ctx.expect_ok(ctx.call("forgot_password", {"email": email}))
    unknown = ctx.call("forgot_password", {"email": ctx.email()})
    ctx.expect_ok(unknown, message=sent.get("message"))
    token = mailed_token(ctx, email, "forgot_password")
    ctx.expect_error(reset(ctx, token, NEW_PASSWORD, NEW_PASSWORD + "x"), "invalid_argument")
    ctx.expect_error(reset(ctx, forged(token), NEW_PASSWORD), "invalid_argument")
    ctx.expect_ok(reset(ctx, token, NEW_PASSWORD))
    ctx.expect_error(reset(ctx, token, NEW_PASSWORD), "invalid_argument")
    old = login(ctx, email, PASSWORD)
    ctx.expect(not old.ok, f"the old password still logs in: {old.describe()}")
    ctx.expect_ok(login(ctx, email, NEW_PASSWORD))


@scenario("mail.invite_members", requires=needs_mail(_BASIC))
def invite_members(ctx: Ctx) -> None:
    """An invitation makes the user and mails a link whose token sets a password;
    invalid and taken addresses are reported; only the admin may invite."""
    email = ctx.email()
    request = {"emails": [email, "not-an-email"]}
    # REST answers {message, Users}, GraphQL {message, Users}, gRPC {message, users}
    # (Authorizer's shapes): the message is compared, the user list checked per surface.
    invited = ctx.call("invite_members", request, ctx.admin, only=("message",))
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    body = ctx.expect_ok(invited)
    ctx.expect("not-an-email" in str(body.get("message")), f"refusal not reported: {body}")
    listed = body.get("Users") or body.get("users") or []
    ctx.expect([u.get("email") for u in listed] == [email], f"invited users are {listed}")
    token = mailed_token(ctx, email, "invite_member")
    ctx.expect_ok(reset(ctx, token, PASSWORD))
    ctx.expect_ok(login(ctx, email, PASSWORD))
    again = ctx.expect_ok(ctx.call("invite_members", {"emails": [email]}, ctx.admin))
    ctx.expect("already exists" in str(again.get("message")), f"taken not reported: {again}")
    # proto3 cannot tell `emails: []` from no emails: gRPC words it as the missing field.
    empty = ctx.call("invite_members", {"emails": []}, ctx.admin, code_only=True)
    ctx.expect_error(empty, "invalid_argument")
    ctx.expect_error(ctx.call("invite_members", {"emails": [ctx.email()]}), "unauthenticated")
