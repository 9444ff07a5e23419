"""Proving an address the account held unverified ends every other credential (issue 36,
item 7), replayed as the attacker would: it verifies an address of its own, adds a
passkey, then moves the account to the victim's unused address. The victim cannot sign
up ("already exists"), so it takes the address back by a magic link (its ``verify_email``
on REST, GraphQL or gRPC) or a reset by mail: the attacker's passkey and sessions end
with the password, as the victim's own proof says. SQLite, real SMTP into a sink."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.conformance.authenticator import SoftAuthenticator
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.mailsink import SpooledMailSink
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, free_port, running
from tests.server.test_auth_flows import (
    NEW_PASSWORD,
    bearer,
    client_for,
    mail_flags,
    mails_to,
    token_in,
)

ADMIN = {"x-authorizer-admin-secret": ADMIN_SECRET}


@dataclass
class Site:
    server: ServerProcess
    sink: SpooledMailSink

    def http(self) -> httpx.Client:
        return client_for(self.server)

    def next_mail_token(self, to: str, send: Callable[[], object]) -> str:
        """The token of the mail ``send`` makes go to ``to``."""
        before = len([m for m in self.sink.messages() if m["To"] == to])
        send()
        return token_in(mails_to(self.sink, to, count=before + 1)[-1])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp("address-proof")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = flags_for(
        "sqlite",
        tmp,
        *mail_flags(sink),
        "--enable-email-verification",
        "--enable-magic-link-login",
        "--enable-passkeys",
    )
    try:
        with running(flags, tmp) as server:
            yield Site(server, sink)
    finally:
        sink.stop()


@dataclass
class Takeover:
    victim: str
    device: SoftAuthenticator
    #: the attacker's access token from before the move
    token: str


def taken_over(site: Site) -> Takeover:
    attacker = f"att{uuid.uuid4().hex[:10]}@evil.test"
    victim = f"vic{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": attacker, "password": PASSWORD, "confirm_password": PASSWORD}
    with site.http() as http:
        token = site.next_mail_token(attacker, lambda: http.post("/v1/signup", json=body))
        verified = http.post("/v1/verify_email", json={"token": token})
        assert verified.status_code == 200, verified.text
        access = verified.json()["access_token"]
        device = SoftAuthenticator(origin=site.server.url, rp_id="127.0.0.1")
        options = http.post("/v1/webauthn_registration_options", json={}, headers=bearer(access))
        assert options.status_code == 200, options.text
        registered = http.post(
            "/v1/webauthn_registration_verify",
            json={"credential": device.create(options.json()["options"]), "name": "mine"},
            headers=bearer(access),
        )
        assert registered.status_code == 200, registered.text
        moved = http.post("/v1/update_profile", json={"email": victim}, headers=bearer(access))
        assert moved.status_code == 200, moved.text
        held = http.post("/v1/admin/users", json={"query": victim}, headers=ADMIN).json()
        ((user,),) = (held["users"],)
        assert (user["email"], user["email_verified"]) == (victim, False)
        # The victim's own signup: the address is taken.
        body = {"email": victim, "password": PASSWORD, "confirm_password": PASSWORD}
        assert http.post("/v1/signup", json=body).status_code != 200
    assert passkey_signs_in(site, device)  # before the victim's proof, it still does
    return Takeover(victim, device, access)


def passkey_signs_in(site: Site, device: SoftAuthenticator) -> bool:
    with site.http() as http:
        options = http.post("/v1/webauthn_login_options", json={})
        assert options.status_code == 200, options.text
        assert json.loads(options.json()["options"])["challenge"]
        answer = http.post(
            "/v1/webauthn_login_verify", json={"credential": device.get(options.json()["options"])}
        )
    return answer.status_code == 200 and bool(answer.json().get("access_token"))


def assert_attacker_shut_out(site: Site, taken: Takeover) -> None:
    assert not passkey_signs_in(site, taken.device)
    with site.http() as http:
        assert http.get("/v1/profile", headers=bearer(taken.token)).status_code == 401
        credentials = http.post(
            "/v1/webauthn_credentials", json={}, headers=bearer(taken.token)
        ).status_code
    assert credentials == 401


def proved_over_rest(site: Site, token: str) -> str:
    with site.http() as http:
        answer = http.post("/v1/verify_email", json={"token": token})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def proved_over_graphql(site: Site, token: str) -> str:
    query = "mutation($t: String!) { verify_email(params: {token: $t}) { access_token } }"
    with site.http() as http:
        answer = http.post("/graphql", json={"query": query, "variables": {"t": token}})
    body = answer.json()
    assert "errors" not in body, body
    return str(body["data"]["verify_email"]["access_token"])


def proved_over_grpc(site: Site, token: str) -> str:
    with grpc.insecure_channel(f"127.0.0.1:{site.server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        answer = stub.VerifyEmail(authorizer_pb2.VerifyEmailRequest(token=token), timeout=10)
    return str(answer.access_token)


@pytest.mark.parametrize("prove", [proved_over_rest, proved_over_graphql, proved_over_grpc])
def test_the_victims_magic_link_ends_the_attackers_passkey_and_sessions(
    site: Site, prove: Callable[[Site, str], str]
) -> None:
    taken = taken_over(site)
    with site.http() as http:
        token = site.next_mail_token(
            taken.victim, lambda: http.post("/v1/magic_link_login", json={"email": taken.victim})
        )
    mine = prove(site, token)
    assert_attacker_shut_out(site, taken)
    with site.http() as http:  # the victim's own session lives on
        assert http.get("/v1/profile", headers=bearer(mine)).status_code == 200
        password = http.post("/v1/login", json={"email": taken.victim, "password": PASSWORD})
    assert password.status_code == 401  # and the attacker's password went before (issue 28)


def test_a_reset_by_mail_of_the_unverified_address_ends_them_too(site: Site) -> None:
    taken = taken_over(site)
    with site.http() as http:
        token = site.next_mail_token(
            taken.victim, lambda: http.post("/v1/forgot_password", json={"email": taken.victim})
        )
        reset = http.post(
            "/v1/reset_password",
            json={"token": token, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
        )
        assert reset.status_code == 200, reset.text
    assert_attacker_shut_out(site, taken)
    with site.http() as http:
        login = http.post("/v1/login", json={"email": taken.victim, "password": NEW_PASSWORD})
    assert login.status_code == 200, login.text


def test_a_reset_of_a_verified_address_keeps_the_owners_passkey(site: Site) -> None:
    """Only proving an address the account held unverified ends the devices."""
    email = f"own{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    with site.http() as http:
        token = site.next_mail_token(email, lambda: http.post("/v1/signup", json=body))
        access = proved_over_rest(site, token)
        device = SoftAuthenticator(origin=site.server.url, rp_id="127.0.0.1")
        options = http.post("/v1/webauthn_registration_options", json={}, headers=bearer(access))
        http.post(
            "/v1/webauthn_registration_verify",
            json={"credential": device.create(options.json()["options"]), "name": "mine"},
            headers=bearer(access),
        ).raise_for_status()
        token = site.next_mail_token(
            email, lambda: http.post("/v1/forgot_password", json={"email": email})
        )
        http.post(
            "/v1/reset_password",
            json={"token": token, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
        ).raise_for_status()
    assert passkey_signs_in(site, device)
