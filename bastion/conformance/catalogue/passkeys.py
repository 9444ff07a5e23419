"""Passkeys (WebAuthn, issue 22) under Authorizer 2.4's operation names, with bastion's
rename and admin rows. A software authenticator (:mod:`conformance.authenticator`)
answers the options; its origin is the deployment's base URL (``--url`` or one of
``--allowed-origins``) and its rp id the one the options name. A deployment without
``--enable-passkeys`` skips these rows, saying so.
"""

from __future__ import annotations

import json
from typing import Any

from bastion.conformance.authenticator import SoftAuthenticator
from bastion.conformance.catalogue.auth import PASSWORD, new_user, password_signup
from bastion.conformance.catalogue.mfa import INVALID_OTP, MFA_COOKIE, with_mfa
from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import Credentials
from bastion.conformance.scenario import Ctx, scenario

#: A ceremony's options carry a fresh challenge each time.
OPTIONS = frozenset({"options", "last_used_at"})
DISABLED = "passkeys are not enabled on this server"
INVALID_PASSKEY = "invalid passkey"
PARKED = "Proceed to mfa verification"


def enabled(ctx: Ctx) -> None:
    probe = ctx.raw_call("webauthn_login_options", {})
    if not probe.ok and probe.message == DISABLED:
        ctx.skip("--enable-passkeys is off on this deployment")


def device(ctx: Ctx, options: str) -> SoftAuthenticator:
    parsed = json.loads(options)
    rp_id = parsed["rp"]["id"] if "rp" in parsed else parsed["rpId"]
    return SoftAuthenticator(origin=ctx.deployment.base_url.rstrip("/"), rp_id=rp_id)


def registered(ctx: Ctx, **signup: Any) -> tuple[str, Credentials, SoftAuthenticator]:
    """A new user (signed in just now) with one passkey: (email, bearer, authenticator)."""
    enabled(ctx)
    email, body, _cookie = new_user(ctx, **signup)
    bearer = Credentials(bearer=str(body["access_token"]))
    options = ctx.expect_ok(ctx.call("webauthn_registration_options", {}, bearer))["options"]
    authenticator = device(ctx, options)
    request = {"credential": authenticator.create(options), "name": "Laptop"}
    answer = ctx.call("webauthn_registration_verify", request, bearer)
    ctx.expect_ok(answer, message="Passkey registered successfully")
    return email, bearer, authenticator


def sign_in_options(ctx: Ctx, **request: Any) -> str:
    options: str = ctx.expect_ok(ctx.call("webauthn_login_options", request))["options"]
    return options


@scenario("passkeys.register_list_rename_delete", requires=password_signup, volatile=OPTIONS)
def register_list_delete(ctx: Ctx) -> None:
    """A passkey registered by a fresh sign-in is listed, renamed and deleted once; the
    same authenticator cannot register twice; anonymous callers are refused."""
    _email, bearer, authenticator = registered(ctx)
    listed = ctx.expect_ok(ctx.call("webauthn_credentials", {}, bearer))["webauthn_credentials"]
    ctx.expect([c["name"] for c in listed] == ["Laptop"], f"listed {listed}")
    row = {"id": listed[0]["id"]}
    renamed = ctx.call("webauthn_rename_credential", {**row, "name": "Phone"}, bearer)
    ctx.expect_ok(renamed, message="Passkey renamed successfully")
    options = ctx.expect_ok(ctx.call("webauthn_registration_options", {}, bearer))["options"]
    again = ctx.call(
        "webauthn_registration_verify", {"credential": authenticator.create(options)}, bearer
    )
    ctx.expect_error(again, "already_exists", "this passkey is registered already")
    ctx.expect_error(ctx.call("webauthn_credentials", {}), "unauthenticated")
    deleted = ctx.call("webauthn_delete_credential", row, bearer)
    ctx.expect_ok(deleted, message="Passkey deleted successfully")
    gone = ctx.call("webauthn_delete_credential", row, bearer)
    ctx.expect_error(gone, "not_found", "passkey not found")
    left = ctx.expect_ok(ctx.call("webauthn_credentials", {}, bearer))
    # (gRPC leaves an empty repeated field out of its answer)
    ctx.expect(not left.get("webauthn_credentials"), f"still listed: {left}")


@scenario("passkeys.passwordless_sign_in_and_refusals", requires=password_signup, volatile=OPTIONS)
def passwordless(ctx: Ctx) -> None:
    """A discoverable credential signs in alone, and for its named user; a replayed
    challenge, another origin, another rp id, a counter that went back and a missing
    user verification are each refused."""
    email, _bearer, authenticator = registered(ctx)
    for request in ({}, {"email": email}):
        credential = authenticator.get(sign_in_options(ctx, **request))
        done = ctx.expect_ok(ctx.call("webauthn_login_verify", {"credential": credential}))
        ctx.expect(bool(done.get("access_token")), f"no access token: {done}")
        ctx.expect((done.get("user") or {}).get("email") == email, f"signed in as {done}")
    replayed = ctx.call("webauthn_login_verify", {"credential": credential}, label="replay")
    ctx.expect_error(replayed, "unauthenticated", "invalid passkey challenge")
    stored = authenticator.counter  # what the last sign-in left on the server
    wrong: list[dict[str, Any]] = [
        {"origin": "https://evil.example"},
        {"rp_id": "evil.example"},
        {"counter": stored},
        {"uv": False},
    ]
    for change in wrong:
        credential = authenticator.get(sign_in_options(ctx), **change)
        refused = ctx.call("webauthn_login_verify", {"credential": credential}, label=str(change))
        ctx.expect_error(refused, "unauthenticated", INVALID_PASSKEY)
    garbled = ctx.call("webauthn_login_verify", {"credential": "not json"})
    ctx.expect_error(garbled, "invalid_argument", "invalid passkey credential")


@scenario("passkeys.admin_lists_and_deletes", requires=password_signup, volatile=OPTIONS)
def admin_rows(ctx: Ctx) -> None:
    """The super-admin lists a user's passkeys and deletes one; without the secret both
    are refused."""
    email, _bearer, _authenticator = registered(ctx)
    user = ctx.expect_ok(ctx.call("user", {"email": email}, ctx.admin))
    wanted = {"user_id": user["id"]}
    ctx.expect_error(ctx.call("webauthn_credentials_of_user", wanted), "unauthenticated")
    listed = ctx.expect_ok(ctx.call("webauthn_credentials_of_user", wanted, ctx.admin))
    rows = listed["webauthn_credentials"]
    ctx.expect(len(rows) == 1, f"listed {rows}")
    row = {**wanted, "id": rows[0]["id"]}
    deleted = ctx.call("webauthn_delete_credential_of_user", row, ctx.admin)
    ctx.expect_ok(deleted, message="Passkey deleted successfully")
    ctx.expect_error(ctx.call("webauthn_delete_credential_of_user", row, ctx.admin), "not_found")


def passkeys_and_mfa(deployment: Deployment) -> str | None:
    return (
        deployment.needs_flag("is_webauthn_enabled")
        or deployment.needs_flag("is_multi_factor_auth_enabled")
        or password_signup(deployment)
    )


@scenario(
    "passkeys.second_factor_parks_for_the_passkey", requires=passkeys_and_mfa, volatile=OPTIONS
)
def parked_for_the_passkey(ctx: Ctx) -> None:
    """With MFA on, a user whose only factor is a passkey is parked for it at login (no
    new authenticator app to enrol; the answer offers the passkey); no code finishes that
    login and there is nothing to resend; the passkey does, once."""
    email, _bearer, authenticator = registered(ctx, is_multi_factor_auth_enabled=True)
    login = ctx.call("login", {"email": email, "password": PASSWORD}, label="parked")
    body = ctx.expect_ok(login)
    if body.get("should_show_email_otp_screen"):
        ctx.skip("this deployment emails a code first (the passkey is offered beside it)")
    ctx.expect(body.get("message") == PARKED, f"not parked for the passkey: {body}")
    ctx.expect(body.get("should_offer_webauthn_mfa_verify") is True, f"no passkey offer: {body}")
    ctx.expect(not body.get("should_show_totp_screen"), f"an app to enrol: {body}")
    ctx.expect(not body.get("access_token"), "a parked login returned tokens")
    cookie = with_mfa(login.cookie(MFA_COOKIE))
    code = {"email": email, "otp": "123456", "is_totp": True}
    ctx.expect_error(ctx.call("verify_otp", code, cookie), "invalid_argument", INVALID_OTP)
    ctx.expect_error(ctx.call("resend_otp", {"email": email}, cookie), "failed_precondition")
    options = ctx.expect_ok(ctx.call("webauthn_login_options", {}, cookie))["options"]
    credential = {"credential": authenticator.get(options)}
    done = ctx.expect_ok(ctx.call("webauthn_login_verify", credential, cookie))
    ctx.expect(bool(done.get("access_token")), f"no access token: {done}")
    ctx.expect((done.get("user") or {}).get("email") == email, f"signed in as {done}")
    again = ctx.call("webauthn_login_options", {}, cookie, label="again")
    ctx.expect_error(again, "unauthenticated", "invalid session")
