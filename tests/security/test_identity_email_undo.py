"""The old address hears of an email change and can undo it (issue 28): a real mail to
it, a link that lands on a page with one button (fetching the link changes nothing), the
button puts the old address back and ends every session, once. SQLite and PostgreSQL +
Redis."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.mailsink import SpooledMailSink
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, free_port, running
from tests.server.test_auth_flows import mail_flags, mails_to, token_in


@dataclass
class Site:
    server: ServerProcess
    sink: SpooledMailSink

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url, headers={"origin": self.server.url}, timeout=30
        )

    def user(self, user_id: str) -> dict[str, object]:
        with self.http() as http:
            answer = http.post(
                "/v1/admin/user",
                json={"id": user_id},
                headers={"x-service-admin-secret": ADMIN_SECRET},
            )
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp(f"email-undo-{request.param}")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = flags_for(request.param, tmp, *mail_flags(sink), "--enable-email-verification=false")
    try:
        with running(flags, tmp) as server:
            yield Site(server, sink)
    finally:
        sink.stop()


def changed(site: Site) -> tuple[str, str, str, str]:
    """An account whose address was changed: (user id, old, new, the undo token)."""
    old = f"owner{uuid.uuid4().hex[:8]}@example.com"
    new = f"taker{uuid.uuid4().hex[:8]}@evil.test"
    with site.http() as http:
        body = {"email": old, "password": PASSWORD, "confirm_password": PASSWORD}
        signed_up = http.post("/v1/signup", json=body)
        assert signed_up.status_code == 200, signed_up.text
        token = signed_up.json()["access_token"]
        moved = http.post(
            "/v1/update_profile", json={"email": new}, headers={"authorization": f"Bearer {token}"}
        )
        assert moved.status_code == 200, moved.text
    (notice,) = mails_to(site.sink, old)
    assert notice["Subject"] == "Your email address was changed"
    assert new in notice.get_body(preferencelist=("html", "plain")).get_content()
    return signed_up.json()["user"]["id"], old, new, token_in(notice)


def test_the_old_address_undoes_the_change_once(site: Site) -> None:
    user_id, old, new, undo = changed(site)
    assert site.user(user_id)["email"] == new
    with site.http() as http:
        # Fetching the link (a mail scanner would) only shows the button.
        page = http.get("/undo_email_change", params={"token": undo})
        assert page.status_code == 200
        assert 'method="post"' in page.text
        assert site.user(user_id)["email"] == new
        done = http.post("/undo_email_change", data={"token": undo})
        assert done.status_code == 200, done.text
        assert "Email change undone" in done.text
        restored = site.user(user_id)
        assert restored["email"] == old
        assert restored["email_verified"] is True
        # The old address signs in again; the link is spent.
        login = http.post("/v1/login", json={"email": old, "password": PASSWORD})
        assert login.status_code == 200, login.text
        again = http.post("/undo_email_change", data={"token": undo})
    assert again.status_code == 400
    assert "this link is not valid any more" in again.text


def test_the_undo_ends_every_session(site: Site) -> None:
    _user_id, _, new, undo = changed(site)
    with site.http() as http:
        taker = http.post("/v1/login", json={"email": new, "password": PASSWORD})
        assert taker.status_code == 200, taker.text
        bearer = {"authorization": f"Bearer {taker.json()['access_token']}"}
        assert http.get("/v1/profile", headers=bearer).status_code == 200
        assert http.post("/undo_email_change", data={"token": undo}).status_code == 200
        assert http.get("/v1/profile", headers=bearer).status_code == 401


@pytest.mark.parametrize("token", ["", "not-a-token", "eyJhbGciOiJIUzI1NiJ9.e30.c2ln"])
def test_a_forged_link_undoes_nothing(site: Site, token: str) -> None:
    with site.http() as http:
        refused = http.post("/undo_email_change", data={"token": token})
    assert refused.status_code == 400
    assert "this link is not valid any more" in refused.text


def test_an_access_token_is_not_an_undo_link(site: Site) -> None:
    user_id, _, new, _ = changed(site)
    with site.http() as http:
        taker = http.post("/v1/login", json={"email": new, "password": PASSWORD})
        refused = http.post("/undo_email_change", data={"token": taker.json()["access_token"]})
    assert refused.status_code == 400
    assert site.user(user_id)["email"] == new
