"""The email-change undo wins (issue 36, item 6), replayed as an attacker who knows the
password: it moves the account to its own address, adds a passkey, then tries to defeat
the owner's undo link by signing up the freed old address without proving it, or by
moving the address a second time (on GraphQL). The undo restores the old address, the
squatter loses it, every session and the passkey added since the change end (the
owner's own passkey stays), and the later change's undo link undoes nothing. SQLite and
PostgreSQL + Redis, email verification on, real SMTP into a sink."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from bastion.conformance.authenticator import SoftAuthenticator
from tests.mailsink import SpooledMailSink
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, free_port, running
from tests.server.test_auth_flows import (
    as_signer,
    bearer,
    client_for,
    mail_flags,
    mails_to,
    token_in,
)

ADMIN = {"x-authorizer-admin-secret": ADMIN_SECRET}
NOTICE = "Your email address was changed"


@dataclass
class Site:
    server: ServerProcess
    sink: SpooledMailSink

    def http(self) -> httpx.Client:
        return client_for(self.server)

    def sent_to(self, to: str) -> list[EmailMessage]:
        return [m for m in self.sink.messages() if m["To"] == to]

    def next_mail(self, to: str, send: Callable[[], object]) -> EmailMessage:
        before = len(self.sent_to(to))
        send()
        return mails_to(self.sink, to, count=before + 1)[-1]

    def user(self, email: str) -> dict[str, Any] | None:
        with self.http() as http:
            found = http.post("/v1/admin/users", json={"query": email}, headers=ADMIN)
        assert found.status_code == 200, found.text
        users = [u for u in found.json()["users"] if u["email"] == email]
        return users[0] if users else None

    def by_id(self, user_id: str) -> dict[str, Any]:
        with self.http() as http:
            found = http.post("/v1/admin/user", json={"id": user_id}, headers=ADMIN)
        assert found.status_code == 200, found.text
        return found.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp(f"undo-wins-{request.param}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = flags_for(
        request.param, tmp, *mail_flags(sink), "--enable-email-verification", "--enable-passkeys"
    )
    try:
        with running(flags, tmp) as server:
            yield Site(server, sink)
    finally:
        sink.stop()


def signed_up(site: Site, email: str) -> str:
    """A proven account (its link followed by the browser that signed up, so it keeps its
    password): its access token."""
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    answers: list[httpx.Response] = []
    with site.http() as http:
        mail = site.next_mail(email, lambda: answers.append(http.post("/v1/signup", json=body)))
        verified = http.post(
            "/v1/verify_email", json={"token": token_in(mail)}, headers=as_signer(answers[0])
        )
    assert verified.status_code == 200, verified.text
    return str(verified.json()["access_token"])


def passkey(site: Site, token: str) -> SoftAuthenticator:
    device = SoftAuthenticator(origin=site.server.url, rp_id="127.0.0.1")
    with site.http() as http:
        options = http.post("/v1/webauthn_registration_options", json={}, headers=bearer(token))
        assert options.status_code == 200, options.text
        done = http.post(
            "/v1/webauthn_registration_verify",
            json={"credential": device.create(options.json()["options"]), "name": "key"},
            headers=bearer(token),
        )
    assert done.status_code == 200, done.text
    return device


def signs_in(site: Site, device: SoftAuthenticator) -> bool:
    with site.http() as http:
        options = http.post("/v1/webauthn_login_options", json={}).json()["options"]
        assert json.loads(options)["challenge"]
        answer = http.post("/v1/webauthn_login_verify", json={"credential": device.get(options)})
    return answer.status_code == 200


@dataclass
class Moved:
    user_id: str
    old: str
    new: str
    #: the owner's undo link token (mailed to the old address)
    undo: str
    #: the attacker's session since the move (it proved its own new address)
    attacker: str
    owners_key: SoftAuthenticator


def moved(site: Site) -> Moved:
    old = f"owner{uuid.uuid4().hex[:8]}@example.com"
    new = f"taker{uuid.uuid4().hex[:8]}@evil.test"
    owners_key = passkey(site, signed_up(site, old))
    next_second()  # the change comes after the owner's passkey, even to the second
    with site.http() as http:
        login = http.post("/v1/login", json={"email": old, "password": PASSWORD})
        assert login.status_code == 200, login.text
        attacker = login.json()["access_token"]
        notice = site.next_mail(
            old,
            lambda: http.post(
                "/v1/update_profile", json={"email": new}, headers=bearer(attacker)
            ).raise_for_status(),
        )
    assert notice["Subject"] == NOTICE
    # The change ended every session; the attacker proves its own address and is back.
    (verification,) = mails_to(site.sink, new)
    with site.http() as http:
        proved = http.post("/v1/verify_email", json={"token": token_in(verification)})
    assert proved.status_code == 200, proved.text
    user = site.user(new)
    assert user is not None
    attacker = proved.json()["access_token"]
    return Moved(user["id"], old, new, token_in(notice), attacker, owners_key)


def next_second() -> None:
    """Wait for the clock's next whole second: the server stamps rows in seconds, and the
    undo ends what was added at or after the change's second."""
    start = int(time.time())
    while int(time.time()) == start:
        time.sleep(0.05)


def undo(site: Site, token: str) -> httpx.Response:
    with site.http() as http:
        return http.post("/undo_email_change", data={"token": token})


def test_an_unverified_squatter_of_the_old_address_loses_it(site: Site) -> None:
    case = moved(site)
    attackers_key = passkey(site, case.attacker)
    body = {"email": case.old, "password": PASSWORD, "confirm_password": PASSWORD}
    with site.http() as http:
        squatted = http.post("/v1/signup", json=body)  # never verified
    assert squatted.status_code == 200, squatted.text
    squatter = site.user(case.old)
    assert squatter is not None
    assert squatter["id"] != case.user_id

    done = undo(site, case.undo)
    assert done.status_code == 200, done.text
    restored = site.by_id(case.user_id)
    assert (restored["email"], restored["email_verified"]) == (case.old, True)
    assert site.by_id(squatter["id"])["email"] is None
    # what the change let in ends; what was there before stays
    assert not signs_in(site, attackers_key)
    assert signs_in(site, case.owners_key)
    with site.http() as http:
        assert http.get("/v1/profile", headers=bearer(case.attacker)).status_code == 401
        login = http.post("/v1/login", json={"email": case.old, "password": PASSWORD})
    assert login.status_code == 200, login.text
    assert login.json()["user"]["id"] == case.user_id


def test_a_second_change_does_not_defeat_the_undo(site: Site) -> None:
    case = moved(site)
    again = f"again{uuid.uuid4().hex[:8]}@evil.test"
    query = "mutation($e: String) { update_profile(params: {email: $e}) { message } }"
    with site.http() as http:
        notice = site.next_mail(
            case.new,
            lambda: http.post(
                "/graphql",
                json={"query": query, "variables": {"e": again}},
                headers=bearer(case.attacker),
            ),
        )
    assert notice["Subject"] == NOTICE
    (verification,) = site.sent_to(again)
    assert site.by_id(case.user_id)["email"] == again

    done = undo(site, case.undo)
    assert done.status_code == 200, done.text
    assert site.by_id(case.user_id)["email"] == case.old
    # The attacker's undo link of its second change undoes nothing now, and the pending
    # verification of the second address is gone.
    refused = undo(site, token_in(notice))
    assert refused.status_code == 400
    assert "this link is not valid any more" in refused.text
    assert site.by_id(case.user_id)["email"] == case.old
    with site.http() as http:
        proof = http.post("/v1/verify_email", json={"token": token_in(verification)})
    assert proof.status_code == 400, proof.text
    assert site.by_id(case.user_id)["email"] == case.old


def test_a_squatter_that_proved_the_address_keeps_it_and_the_link_lives_on(
    site: Site,
) -> None:
    """Only a verified holder refuses the undo (it proved the mailbox too); nothing is
    written, so the link still works once the holder is gone."""
    case = moved(site)
    signed_up(site, case.old)
    refused = undo(site, case.undo)
    assert refused.status_code == 400
    assert "belongs to another account" in refused.text
    assert site.by_id(case.user_id)["email"] == case.new
    holder = site.user(case.old)
    assert holder is not None
    with site.http() as http:
        http.post(
            "/v1/admin/delete_user", json={"id": holder["id"]}, headers=ADMIN
        ).raise_for_status()
    assert undo(site, case.undo).status_code == 200
    assert site.by_id(case.user_id)["email"] == case.old
