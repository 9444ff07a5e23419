"""Texted codes: phone verification at sign-up, password reset by SMS code, SMS as a
second factor at login and its setup (``sms_otp_mfa_setup``).

These rows need the suite's own SMS sink (``--sms-sink HOST:PORT``) and a deployment that
texts through it (``--sms-api-url http://HOST:PORT``); without a sink they are skipped
by name, and once a wait for a text ends with nothing at all from the deployment having
reached the sink, the remaining rows are skipped saying so. Each scenario signs up its
own number (with a unique address, so it can be removed), takes the code out of the text
its number received and hands it back through the surface under test. Phone numbers
differ between surfaces, so ``phone_number`` is compared for presence only.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from bastion.conformance import smssink
from bastion.conformance.catalogue.auth import PASSWORD, SESSION_COOKIE, remove_user
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.scenario import Ctx, scenario

NEW_PASSWORD = "Conf0rmance!sms"
NO_SINK = (
    "no --sms-sink given: SMS rows need the deployment's --sms-api-url pointed at the "
    "suite's own SMS sink"
)
MFA_COOKIE = "mfa"
_PHONE = frozenset({"phone_number"})
_MOBILE = ("is_sign_up_enabled", "is_mobile_basic_authentication_enabled")


def needs_sms(*flags: str) -> Callable[[Deployment], str | None]:
    def requires(deployment: Deployment) -> str | None:
        sink = smssink.current()
        if sink is None:
            return NO_SINK
        if sink.unreached is not None:
            return sink.unreached
        for flag in flags:
            if not deployment.flag(flag):
                return f"{flag} is off on this deployment"
        if deployment.flag("is_email_verification_enabled"):
            return "is_email_verification_enabled: a sign-up with an address is not by phone"
        return None

    return requires


def texted_code(ctx: Ctx, phone: str) -> str:
    """The code of the next text to ``phone``; skips the row when the deployment has
    never reached the sink (it texts elsewhere)."""
    sink = smssink.current()
    ctx.expect(sink is not None, "the SMS sink stopped")
    assert sink is not None
    try:
        return sink.next_code(phone)
    except smssink.NoText as exc:
        if sink.unreached is not None:
            ctx.skip(sink.unreached)
        ctx.expect(False, str(exc))
        raise


def unique_phone() -> str:
    return f"+1555{secrets.randbelow(10**7):07d}"


def with_mfa(outcome: Outcome) -> Credentials:
    cookie = outcome.cookie(MFA_COOKIE)
    return Credentials(cookies=((MFA_COOKIE, cookie or ""),))


def phone_signup(ctx: Ctx, **extra: Any) -> tuple[str, Outcome]:
    """Sign a unique number up (with a unique address, to remove it afterwards)."""
    email, phone = ctx.email(), unique_phone()
    request = {
        "email": email,
        "phone_number": phone,
        "password": PASSWORD,
        "confirm_password": PASSWORD,
        **extra,
    }
    outcome = ctx.call("signup", request)
    ctx.cleanups.append(lambda: remove_user(ctx, email))
    ctx.expect_ok(outcome)
    return phone, outcome


def verified_phone_user(ctx: Ctx, **extra: Any) -> str:
    """A signed-up number, its verification code (if the deployment asks for one) given."""
    phone, signed = phone_signup(ctx, **extra)
    if signed.body.get("should_show_mobile_otp_screen"):
        code = texted_code(ctx, phone)
        request = {"phone_number": phone, "otp": code}
        ctx.expect_ok(ctx.call("verify_otp", request, with_mfa(signed)))
    return phone


def login(ctx: Ctx, phone: str, password: str = PASSWORD) -> Outcome:
    return ctx.call("login", {"phone_number": phone, "password": password})


@scenario(
    "sms.phone_signup_verify_otp",
    requires=needs_sms(*_MOBILE, "is_phone_verification_enabled"),
    volatile=_PHONE,
)
def phone_signup_verify_otp(ctx: Ctx) -> None:
    """A phone sign-up texts a code and does not log in; a wrong code is invalid_argument;
    the texted code proves the number and signs in, once."""
    phone, signed = phone_signup(ctx)
    body = signed.body
    ctx.expect(body.get("should_show_mobile_otp_screen") is True, f"no code asked: {body}")
    ctx.expect(not body.get("access_token"), "a phone sign-up logged in before its code")
    ctx.expect(signed.cookie(MFA_COOKIE) is not None, f"no mfa cookie: {signed.cookies}")
    code = texted_code(ctx, phone)
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    challenge = with_mfa(signed)
    bad = ctx.call("verify_otp", {"phone_number": phone, "otp": wrong}, challenge)
    ctx.expect_error(bad, "invalid_argument", "invalid otp")
    done = ctx.call("verify_otp", {"phone_number": phone, "otp": code}, challenge)
    answer = ctx.expect_ok(done)
    ctx.expect(bool(answer.get("access_token")), f"verify_otp gave no token: {answer}")
    ctx.expect(done.cookie(SESSION_COOKIE) is not None, "verify_otp set no session cookie")
    token = Credentials(bearer=str(answer["access_token"]))
    ctx.expect_ok(ctx.call("profile", credentials=token), phone_number_verified=True)
    again = ctx.call("verify_otp", {"phone_number": phone, "otp": code}, challenge)
    ctx.expect_error(again, "unauthenticated", "invalid session")


@scenario("sms.forgot_reset_password_by_phone", requires=needs_sms(*_MOBILE), volatile=_PHONE)
def forgot_reset_password_by_phone(ctx: Ctx) -> None:
    """forgot_password by phone texts a code (an unknown number gets the same answer);
    reset_password with the code sets the new password once; a wrong code is
    invalid_argument, a spent one unauthenticated."""
    phone = verified_phone_user(ctx)
    asked = ctx.call("forgot_password", {"phone_number": phone})
    if not asked.ok and asked.code == "failed_precondition":
        ctx.skip(f"forgot_password by phone: {asked.message}")
    sent = ctx.expect_ok(asked, should_show_mobile_otp_screen=True)
    unknown = ctx.call("forgot_password", {"phone_number": unique_phone()})
    ctx.expect_ok(unknown, message=sent.get("message"), should_show_mobile_otp_screen=True)
    code = texted_code(ctx, phone)
    request = {
        "phone_number": phone,
        "otp": f"{(int(code) + 1) % 10**6:06d}",
        "password": NEW_PASSWORD,
        "confirm_password": NEW_PASSWORD,
    }
    challenge = with_mfa(asked)
    ctx.expect_error(ctx.call("reset_password", request, challenge), "invalid_argument")
    ctx.expect_ok(ctx.call("reset_password", {**request, "otp": code}, challenge))
    spent = ctx.call("reset_password", {**request, "otp": code}, challenge)
    ctx.expect_error(spent, "unauthenticated", "invalid session")
    old = login(ctx, phone)
    ctx.expect(not old.ok, f"the old password still logs in: {old.describe()}")
    new = login(ctx, phone, NEW_PASSWORD)
    ctx.expect(new.ok, f"the new password does not log in: {new.describe()}")


@scenario(
    "sms.mfa_login",
    requires=needs_sms(*_MOBILE, "is_multi_factor_auth_enabled"),
    volatile=_PHONE,
)
def mfa_login(ctx: Ctx) -> None:
    """With SMS codes as a second factor, a phone login texts a code and gives no tokens;
    verify_otp with the code completes it once."""
    phone = verified_phone_user(ctx, is_multi_factor_auth_enabled=True)
    wrong_password = login(ctx, phone, NEW_PASSWORD)
    ctx.expect_error(wrong_password, "unauthenticated", "invalid credentials")
    logged = login(ctx, phone)
    body = ctx.expect_ok(logged)
    if not body.get("should_show_mobile_otp_screen"):
        ctx.skip("a phone login gets no SMS code here (--enable-sms-otp is off)")
    ctx.expect(not body.get("access_token"), f"tokens before the second factor: {body}")
    code = texted_code(ctx, phone)
    challenge = with_mfa(logged)
    done = ctx.call("verify_otp", {"phone_number": phone, "otp": code}, challenge)
    ctx.expect(bool(ctx.expect_ok(done).get("access_token")), "verify_otp gave no token")
    again = ctx.call("verify_otp", {"phone_number": phone, "otp": code}, challenge)
    ctx.expect_error(again, "unauthenticated", "invalid session")


@scenario(
    "sms.mfa_otp_setup",
    requires=needs_sms(*_MOBILE, "is_multi_factor_auth_enabled"),
    volatile=_PHONE,
)
def sms_otp_setup(ctx: Ctx) -> None:
    """A phone login parked for its code may set texted codes up: ``sms_otp_mfa_setup``
    texts a new code whose ``verify_otp`` signs in and enrols ``sms_otp``."""
    phone = verified_phone_user(ctx, is_multi_factor_auth_enabled=True)
    logged = login(ctx, phone)
    body = ctx.expect_ok(logged)
    if not body.get("should_show_mobile_otp_screen"):
        ctx.skip("a phone login gets no SMS code here (--enable-sms-otp is off)")
    ctx.expect(body.get("should_offer_sms_otp_mfa_setup") is True, f"no SMS setup offer: {body}")
    texted_code(ctx, phone)  # the login's own code
    sent = ctx.call("sms_otp_mfa_setup", {"phone_number": phone}, with_mfa(logged))
    ctx.expect_ok(sent, message="Please check text message for the OTP")
    code = texted_code(ctx, phone)
    done = ctx.call("verify_otp", {"phone_number": phone, "otp": code}, with_mfa(sent))
    signed_in = ctx.expect_ok(done)
    user = signed_in.get("user") or {}
    ctx.expect(bool(signed_in.get("access_token")), "verify_otp gave no token")
    ctx.expect(user.get("enrolled_mfa_methods") == ["sms_otp"], f"not enrolled: {user}")
