"""The MFA enrolment calls never let a password alone replace, skip or lock a working
second factor (issue 36, items 2, 3, 4 and 12), replayed as the attacker would: a login
parked by the victim's password, then ``totp_mfa_setup``, ``email_otp_mfa_setup``,
``skip_mfa_setup`` or ``lock_mfa`` with its ``mfa`` cookie, on REST, GraphQL and gRPC.

Two servers, MFA offered (``--enforce-mfa=false``), authenticator apps and passkeys on:
one also mails codes (a real SMTP sink), one sends none (so a passkey is a user's only
factor). A first enrolment by a user with nothing set up still works (the last test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pyotp
import pytest

from bastion.conformance.authenticator import SoftAuthenticator
from bastion.core.state_machines.mfa_setup import (
    FRESH_FACTOR_NEEDED,
    LOCK_HAS_FACTOR,
    SETUP_HAS_FACTOR,
    SKIP_ENROLLED,
)
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.mailsink import SpooledMailSink
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, free_port, running
from tests.server.test_auth_flows import bearer, client_for, mail_flags, mails_to
from tests.server.test_mfa_email import code_in, mfa_cookie, with_mfa

MFA = ["--enable-mfa", "--enforce-mfa=false", "--enable-totp-login", "--enable-passkeys"]
ADMIN = {"x-authorizer-admin-secret": ADMIN_SECRET}


@dataclass
class Site:
    server: ServerProcess
    sink: SpooledMailSink | None

    def http(self) -> httpx.Client:
        return client_for(self.server)


@pytest.fixture(scope="module")
def mailing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp("mfa-enrolment-mail")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = flags_for(
        "sqlite",
        tmp,
        *mail_flags(sink),
        *MFA,
        "--enable-email-otp",
        "--enable-email-verification=false",
    )
    try:
        with running(flags, tmp) as server:
            yield Site(server, sink)
    finally:
        sink.stop()


@pytest.fixture(scope="module")
def codeless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp("mfa-enrolment-passkey")
    with running(flags_for("sqlite", tmp, *MFA), tmp) as server:
        yield Site(server, None)


def signed_up(site: Site, *, mfa_on: bool = True) -> tuple[str, str]:
    """A victim with MFA switched on in its profile: its email and access token."""
    email = f"mfa{uuid.uuid4().hex[:10]}@example.com"
    body: dict[str, Any] = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    if mfa_on:
        body["is_multi_factor_auth_enabled"] = True
    with site.http() as http:
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return email, answer.json()["access_token"]


def parked(site: Site, email: str) -> tuple[str, dict[str, Any]]:
    """The attacker's password login, parked for the victim's second factor."""
    with site.http() as http:
        answer = http.post("/v1/login", json={"email": email, "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    assert not answer.json().get("access_token"), answer.text
    return mfa_cookie(answer), answer.json()


def stored(site: Site, email: str) -> dict[str, Any]:
    with site.http() as http:
        answer = http.post("/v1/admin/users", json={"query": email}, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    (user,) = answer.json()["users"]
    return user  # type: ignore[no-any-return]


def with_passkey(site: Site, token: str) -> SoftAuthenticator:
    device = SoftAuthenticator(origin=site.server.url, rp_id="127.0.0.1")
    with site.http() as http:
        options = http.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
        assert options.status_code == 200, options.text
        credential = device.create(options.json()["options"])
        done = http.post(
            "/v1/webauthn_registration_verify",
            json={"credential": credential, "name": "Victim's key"},
            headers=bearer(token),
        )
    assert done.status_code == 200, done.text
    return device


def rest(site: Site, path: str, email: str, cookie: str) -> httpx.Response:
    with site.http() as http:
        return http.post(f"/v1/{path}", json={"email": email}, headers=with_mfa(cookie))


GRAPHQL = {
    "totp_mfa_setup": "mutation($p: OtpMfaSetupRequest) { totp_mfa_setup(params: $p) { message } }",
    "email_otp_mfa_setup": (
        "mutation($p: OtpMfaSetupRequest) { email_otp_mfa_setup(params: $p) { message } }"
    ),
    "skip_mfa_setup": (
        "mutation($p: SkipMfaSetupRequest!) { skip_mfa_setup(params: $p) { access_token } }"
    ),
    "lock_mfa": "mutation($p: LockMfaRequest!) { lock_mfa(params: $p) { message } }",
}
GRPC = {
    "totp_mfa_setup": ("TotpMfaSetup", authorizer_pb2.TotpMfaSetupRequest),
    "email_otp_mfa_setup": ("EmailOtpMfaSetup", authorizer_pb2.EmailOtpMfaSetupRequest),
    "skip_mfa_setup": ("SkipMfaSetup", authorizer_pb2.SkipMfaSetupRequest),
    "lock_mfa": ("LockMfa", authorizer_pb2.LockMfaRequest),
}


def refused_everywhere(
    site: Site, operation: str, email: str, message: str, enrolled: tuple[str, ...] = ()
) -> None:
    """The operation with a freshly parked login's cookie: the same refusal on each
    surface, and the parked login is not used up (the owner can still finish it)."""
    cookie, _ = parked(site, email)
    answer = rest(site, operation, email, cookie)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"code": "failed_precondition", "message": message}
    with site.http() as http:
        graphql = http.post(
            "/graphql",
            json={"query": GRAPHQL[operation], "variables": {"p": {"email": email}}},
            headers=with_mfa(cookie),
        )
    error = graphql.json()["errors"][0]
    assert (error["extensions"]["code"], error["message"]) == ("failed_precondition", message)
    name, message_type = GRPC[operation]
    with grpc.insecure_channel(f"127.0.0.1:{site.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            getattr(stub, name)(
                message_type(email=email), metadata=(("cookie", f"mfa={cookie}"),), timeout=10
            )
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert raised.value.details() == message
    user = stored(site, email)
    assert tuple(user["enrolled_mfa_methods"] or ()) == enrolled
    assert user["has_skipped_mfa_setup_at"] is None
    assert user["mfa_locked_at"] is None


def test_item_2_an_emailed_code_is_not_replaced_by_the_attackers_authenticator(
    mailing: Site,
) -> None:
    email, _ = signed_up(mailing)
    refused_everywhere(mailing, "totp_mfa_setup", email, SETUP_HAS_FACTOR)
    # The victim's factor still guards the login: its own emailed code signs in.
    assert passed_emailed_code(mailing, email)


def test_item_2_an_enrolled_email_code_is_not_replaced(mailing: Site) -> None:
    email, _ = signed_up(mailing)
    cookie, _ = parked(mailing, email)
    sent = rest(mailing, "email_otp_mfa_setup", email, cookie)  # the same proof: allowed
    assert sent.status_code == 200, sent.text
    assert mailing.sink is not None
    code = code_in(mails_to(mailing.sink, email, count=2)[-1])
    with mailing.http() as http:
        done = http.post(
            "/v1/verify_otp",
            json={"email": email, "otp": code},
            headers=with_mfa(mfa_cookie(sent)),
        )
    assert done.status_code == 200, done.text
    assert stored(mailing, email)["enrolled_mfa_methods"] == ["email_otp"]
    cookie, _ = parked(mailing, email)
    answer = rest(mailing, "totp_mfa_setup", email, cookie)
    assert answer.json() == {"code": "failed_precondition", "message": SETUP_HAS_FACTOR}
    assert stored(mailing, email)["enrolled_mfa_methods"] == ["email_otp"]


def test_items_2_4_12_a_passkey_is_neither_replaced_skipped_nor_locked(codeless: Site) -> None:
    email, token = signed_up(codeless)
    with_passkey(codeless, token)
    _, body = parked(codeless, email)
    assert body["should_offer_webauthn_mfa_verify"] is True
    refused_everywhere(codeless, "totp_mfa_setup", email, SETUP_HAS_FACTOR)
    refused_everywhere(codeless, "skip_mfa_setup", email, SKIP_ENROLLED)
    refused_everywhere(codeless, "lock_mfa", email, LOCK_HAS_FACTOR)
    # the next password login is still parked for the passkey
    _, again = parked(codeless, email)
    assert again["should_offer_webauthn_mfa_verify"] is True


def test_item_4_mfa_switched_on_with_an_emailed_code_is_never_skipped(mailing: Site) -> None:
    email, _ = signed_up(mailing)
    refused_everywhere(mailing, "skip_mfa_setup", email, SKIP_ENROLLED)
    _, again = parked(mailing, email)
    assert again["should_show_email_otp_screen"] is True


def passed_emailed_code(site: Site, email: str) -> str:
    """The owner's login, passed with its emailed code: a fresh second factor's token."""
    before = len(sent_to(site, email))
    cookie, body = parked(site, email)
    assert body["should_show_email_otp_screen"] is True
    assert site.sink is not None
    code = code_in(mails_to(site.sink, email, count=before + 1)[-1])
    with site.http() as http:
        done = http.post(
            "/v1/verify_otp", json={"email": email, "otp": code}, headers=with_mfa(cookie)
        )
    assert done.status_code == 200, done.text
    return str(done.json()["access_token"])


def sent_to(site: Site, email: str) -> list[Any]:
    assert site.sink is not None
    return [m for m in site.sink.messages() if m["To"] == email]


def enrol_authenticator(site: Site, email: str, token: str) -> str:
    """Rule 2b: the owner adds an authenticator from its signed-in session."""
    with site.http() as http:
        shown = http.post("/v1/totp_mfa_setup", json={"email": email}, headers=bearer(token))
        assert shown.status_code == 200, shown.text
        secret = str(shown.json()["authenticator_secret"])
        done = http.post(
            "/v1/verify_otp",
            json={"email": email, "otp": pyotp.TOTP(secret).now(), "is_totp": True},
            headers=with_mfa(mfa_cookie(shown)),
        )
    assert done.status_code == 200, done.text
    return secret


def test_item_3_a_verified_authenticator_is_not_swapped_for_a_mailbox_code(
    mailing: Site,
) -> None:
    email, _ = signed_up(mailing)
    enrol_authenticator(mailing, email, passed_emailed_code(mailing, email))
    assert stored(mailing, email)["enrolled_mfa_methods"] == ["totp"]
    # The attacker holds the mailbox (a reset gave it the password): the login asks the
    # authenticator, and a mailed code cannot take its place.
    _, body = parked(mailing, email)
    assert body["should_show_totp_screen"] is True
    refused_everywhere(mailing, "email_otp_mfa_setup", email, SETUP_HAS_FACTOR, ("totp",))


def test_a_session_without_a_fresh_factor_adds_none(mailing: Site) -> None:
    """A session from before MFA was switched on is no proof of the emailed code."""
    email, token = signed_up(mailing, mfa_on=False)
    with mailing.http() as http:
        on = http.post(
            "/v1/update_profile", json={"is_multi_factor_auth_enabled": True}, headers=bearer(token)
        )
        assert on.status_code == 200, on.text
        refused = http.post("/v1/totp_mfa_setup", json={"email": email}, headers=bearer(token))
    assert refused.json() == {"code": "failed_precondition", "message": FRESH_FACTOR_NEEDED}
    assert stored(mailing, email)["enrolled_mfa_methods"] in (None, [])


def test_a_user_with_nothing_set_up_still_enrols_from_the_parked_login(codeless: Site) -> None:
    email, _ = signed_up(codeless)
    cookie, body = parked(codeless, email)
    assert body["should_show_totp_screen"] is True
    shown = rest(codeless, "totp_mfa_setup", email, cookie)
    assert shown.status_code == 200, shown.text
    secret = shown.json()["authenticator_secret"]
    with codeless.http() as http:
        done = http.post(
            "/v1/verify_otp",
            json={"email": email, "otp": pyotp.TOTP(secret).now(), "is_totp": True},
            headers=with_mfa(mfa_cookie(shown)),
        )
    assert done.status_code == 200, done.text
    assert stored(codeless, email)["enrolled_mfa_methods"] == ["totp"]
