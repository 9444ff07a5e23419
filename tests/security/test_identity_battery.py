"""Identity attacks of the second battery: look-alike addresses opening second accounts,
control characters in identifiers, a stranger's password surviving the owner's first
sign-in, and a magic link outliving a password reset. Real mail through an SMTP sink;
SQLite and PostgreSQL + Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.mailsink import SpooledMailSink
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ServerProcess, free_port, running
from tests.server.test_auth_flows import as_signer, mail_flags, mails_to, token_in

NEW_PASSWORD = "Identity!pass2"
STRANGER_PASSWORD = "Stranger!pass3"


@dataclass
class Site:
    server: ServerProcess
    sink: SpooledMailSink

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url, headers={"origin": self.server.url}, timeout=30
        )


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp(f"identity-{request.param}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = flags_for(
        request.param,
        tmp,
        *mail_flags(sink),
        "--enable-email-verification=true",
        "--enable-magic-link-login=true",
    )
    try:
        with running(flags, tmp) as server:
            yield Site(server, sink)
    finally:
        sink.stop()


def address() -> tuple[str, str]:
    name = f"dup{uuid.uuid4().hex[:8]}"
    return name, f"{name}@x.io"


def signup(http: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    body = {"email": email, "password": password, "confirm_password": password}
    return http.post("/v1/signup", json=body)


def verified(site: Site, http: httpx.Client, email: str, signed_up: httpx.Response) -> None:
    """Follow the sign-up link as the browser that signed up."""
    token = token_in(mails_to(site.sink, email)[-1])
    answer = http.post("/v1/verify_email", json={"token": token}, headers=as_signer(signed_up))
    assert answer.status_code == 200, answer.text


def test_look_alike_addresses_are_one_account(site: Site) -> None:
    name, email = address()
    with site.http() as http:
        signed_up = signup(http, email)
        assert signed_up.status_code == 200
        for twin in (f"{name}@\uff58.io", f"{name}@x.io.", f"{name.upper()}@X.IO"):
            again = signup(http, twin)
            assert again.status_code == 400, (twin, again.text)
            assert again.json()["message"] == "user with given email already exists"
        verified(site, http, email, signed_up)
        login = http.post("/v1/login", json={"email": f"{name}@\uff58.io.", "password": PASSWORD})
    assert login.status_code == 200, login.text
    assert login.json()["user"]["email"] == email


@pytest.mark.parametrize("field", ["email", "given_name"])
def test_control_characters_are_refused(site: Site, field: str) -> None:
    body = {
        "email": f"nul{uuid.uuid4().hex[:6]}@x.io",
        "password": PASSWORD,
        "confirm_password": PASSWORD,
    }
    body[field] = "a\u0000b" + ("@x.io" if field == "email" else "")
    with site.http() as http:
        answer = http.post("/v1/signup", json=body)
        login = http.post("/v1/login", json={"email": "a\u0000b@x.io", "password": PASSWORD})
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_argument"
    assert login.status_code == 400, login.text


def test_a_strangers_password_does_not_survive_the_owners_magic_link(site: Site) -> None:
    _, email = address()
    with site.http() as stranger:
        # The stranger signs up with the owner's address; unverified, it cannot log in.
        assert signup(stranger, email, STRANGER_PASSWORD).status_code == 200
    with site.http() as owner:
        assert owner.post("/v1/magic_link_login", json={"email": email}).status_code == 200
        link = token_in(mails_to(site.sink, email, 2)[-1])
        signed_in = owner.post("/v1/verify_email", json={"token": link})
        assert signed_in.status_code == 200, signed_in.text
    with site.http() as stranger:
        refused = stranger.post("/v1/login", json={"email": email, "password": STRANGER_PASSWORD})
    assert refused.status_code in (400, 401), refused.text
    assert "access_token" not in refused.text


def test_a_strangers_password_does_not_survive_the_owners_signup_link(site: Site) -> None:
    _, email = address()
    with site.http() as stranger:
        assert signup(stranger, email, STRANGER_PASSWORD).status_code == 200
    # The owner, mailed a link for an account it never made, follows it from a browser
    # with no signer cookie for it (here: one for another account).
    link = token_in(mails_to(site.sink, email)[-1])
    _, other = address()
    with site.http() as elsewhere:
        decoy = signup(elsewhere, other, STRANGER_PASSWORD)
        signed_in = elsewhere.post(
            "/v1/verify_email", json={"token": link}, headers=as_signer(decoy)
        )
        assert signed_in.status_code == 200, signed_in.text
        assert signed_in.json()["user"]["email_verified"] is True
    with site.http() as http:
        refused = http.post("/v1/login", json={"email": email, "password": STRANGER_PASSWORD})
        assert refused.status_code == 401, refused.text
        # The owner sets its own password by a reset.
        assert http.post("/v1/forgot_password", json={"email": email}).status_code == 200
        reset = token_in(mails_to(site.sink, email, 2)[-1])
        body = {"token": reset, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD}
        assert http.post("/v1/reset_password", json=body).status_code == 200
        owner = http.post("/v1/login", json={"email": email, "password": NEW_PASSWORD})
    assert owner.status_code == 200, owner.text


def test_a_magic_link_dies_with_a_password_reset(site: Site) -> None:
    _, email = address()
    with site.http() as http:
        signed_up = signup(http, email)
        assert signed_up.status_code == 200
        verified(site, http, email, signed_up)
        assert http.post("/v1/magic_link_login", json={"email": email}).status_code == 200
        magic = token_in(mails_to(site.sink, email, 2)[-1])
        assert http.post("/v1/forgot_password", json={"email": email}).status_code == 200
        reset = token_in(mails_to(site.sink, email, 3)[-1])
        done = http.post(
            "/v1/reset_password",
            json={"token": reset, "password": NEW_PASSWORD, "confirm_password": NEW_PASSWORD},
        )
        assert done.status_code == 200, done.text
        late = http.post("/v1/verify_email", json={"token": magic})
    assert late.status_code != 200, late.text
    assert "access_token" not in late.text


def test_mailed_links_to_one_address_are_throttled_alike_for_known_and_unknown(
    site: Site,
) -> None:
    _, known = address()
    _, unknown = address()
    with site.http() as http:
        assert signup(http, known).status_code == 200
        for email in (known, unknown):
            answers = [
                http.post("/v1/forgot_password", json={"email": email}).status_code
                for _ in range(5)
            ]
            assert answers == [200] * 5, (email, answers)
            # the budget is per address, whatever mail a request would trigger
            for path in ("/v1/forgot_password", "/v1/magic_link_login"):
                refused = http.post(path, json={"email": email})
                assert refused.status_code == 429, (email, path, refused.text)
                assert refused.json()["code"] == "resource_exhausted"
