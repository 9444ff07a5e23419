"""The hosted pages' passkeys and sessions (issue 22) over real HTTP.

Two servers on SQLite: ``passkeys`` (``--enable-passkeys`` with MFA enforced and an
authenticator app as the only code method, so a passkey is a user's second factor) and
``plain`` (defaults: no passkeys, no MFA). The passkey ceremonies are what
``static/passkeys.js`` sends, made by a software authenticator from the same cookies as
the page (the script in a real browser is tests/server/test_pages_passkeys_browser.py).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import quote

import httpx
import pyotp
import pytest

from bastion.conformance.authenticator import SoftAuthenticator
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ServerProcess, base_flags, start_server
from tests.server.test_pages import (
    browser,
    form,
    forms,
    page_login,
    page_signup,
    submit,
    unique_email,
)

SERVERS = {
    "passkeys": (
        "--enable-passkeys",
        "--enable-mfa",
        "--enforce-mfa",
        "--enable-totp-login",
    ),
    "plain": (),
}


class Site:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: dict[str, ServerProcess] = {}

    def server(self, name: str) -> ServerProcess:
        if name not in self.started:
            flags = [
                *base_flags("sqlite", fresh_sqlite_url(self.tmp, name)),
                "--app-cookie-secure=false",
                *SERVERS[name],
            ]
            self.started[name] = start_server(flags, self.tmp, name=name)
        return self.started[name]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    site = Site(tmp_path_factory.mktemp("pages-account"))
    try:
        yield site
    finally:
        for server in site.started.values():
            server.terminate()


@pytest.fixture(scope="module")
def passkeys(site: Site) -> ServerProcess:
    return site.server("passkeys")


@pytest.fixture(scope="module")
def plain(site: Site) -> ServerProcess:
    return site.server("plain")


# -- what passkeys.js does, from the page's own cookies ---------------------------------------


def device_for(server: ServerProcess) -> SoftAuthenticator:
    return SoftAuthenticator(origin=server.url, rp_id="127.0.0.1")


def register(client: httpx.Client, device: SoftAuthenticator, name: str) -> None:
    options = client.post("/v1/webauthn_registration_options", json={})
    assert options.status_code == 200, options.text
    credential = device.create(options.json()["options"])
    done = client.post(
        "/v1/webauthn_registration_verify", json={"credential": credential, "name": name}
    )
    assert done.status_code == 200, done.text


def sign_in(client: httpx.Client, device: SoftAuthenticator) -> httpx.Response:
    options = client.post("/v1/webauthn_login_options", json={})
    assert options.status_code == 200, options.text
    text = options.json()["options"]
    return client.post("/v1/webauthn_login_verify", json={"credential": device.get(text)})


def passkey_forms(page: httpx.Response) -> dict[str, str]:
    """``data-passkey`` -> ``data-next`` of the script's forms; each must be hidden."""
    found = {}
    for tag in re.findall(r"<form [^>]*data-passkey=[^>]*>", page.text):
        assert re.search(r"\shidden(\s|>)", tag), tag
        kind = re.search(r'data-passkey="([^"]+)"', tag)
        target = re.search(r'data-next="([^"]*)"', tag)
        assert kind is not None, tag
        assert target is not None, tag
        found[kind.group(1)] = unescape(target.group(1))
    return found


def no_inline_code(page: httpx.Response) -> None:
    """The CSP allows scripts from this origin only: no inline script, no handler attribute."""
    rest = page.text.replace('<script src="/app/assets/passkeys.js" defer></script>', "")
    assert "<script" not in rest
    assert not re.search(r"\son[a-z]+=", page.text)


def user_with_passkey(server: ServerProcess, client: httpx.Client) -> tuple[str, SoftAuthenticator]:
    """Signed up on the pages (signed in), with a passkey "Laptop" from the profile."""
    email = unique_email("pk")
    created = page_signup(client, email)
    assert created.status_code == 303, created.text
    device = device_for(server)
    register(client, device, "Laptop")
    return email, device


def sign_out(client: httpx.Client) -> None:
    page = client.get("/app/profile")
    assert page.status_code == 200, page.text
    assert submit(client, page, "/app/logout").status_code == 200


# -- the login page ---------------------------------------------------------------------------


def test_the_login_page_offers_a_passkey_only_through_the_script(
    passkeys: ServerProcess, plain: ServerProcess
) -> None:
    with browser(passkeys) as client:
        page = client.get("/app")
        assert page.status_code == 200
        assert passkey_forms(page) == {"sign-in": "/app/profile"}
        assert "Sign in with a passkey" in page.text
        no_inline_code(page)
        assert '<script src="/app/assets/passkeys.js" defer></script>' in page.text
        # The password form stays a plain form.
        assert form(page, "/app").fields.keys() >= {"csrf_token", "identifier", "password"}
        wanted = f"{passkeys.url}/after"
        aimed = client.get(f"/app?redirect_uri={quote(wanted, safe='')}")
        assert passkey_forms(aimed) == {"sign-in": wanted}
    script = httpx.get(f"{passkeys.url}/app/assets/passkeys.js")
    assert script.status_code == 200
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    for operation in ("login_options", "login_verify", "registration_options"):
        assert f"/v1/webauthn_{operation}" in script.text
    assert "window.PublicKeyCredential" in script.text

    with browser(plain) as client:
        page = client.get("/app")
    assert "<script" not in page.text
    assert "data-passkey" not in page.text
    assert "passkey" not in page.text.lower()


def test_passwordless_sign_in_gives_the_pages_a_session(passkeys: ServerProcess) -> None:
    with browser(passkeys) as client:
        email, device = user_with_passkey(passkeys, client)
        sign_out(client)
        assert client.get("/app/profile").status_code == 303
        assert passkey_forms(client.get("/app")) == {"sign-in": "/app/profile"}
        done = sign_in(client, device)
        assert done.status_code == 200, done.text
        profile = client.get("/app/profile")
        assert profile.status_code == 200, profile.text
        assert email in profile.text


# -- the passkey as the second factor ---------------------------------------------------------


def test_a_password_login_parked_for_the_passkey_shows_the_passkey_page(
    passkeys: ServerProcess,
) -> None:
    with browser(passkeys) as client:
        email, device = user_with_passkey(passkeys, client)
        sign_out(client)
        parked = page_login(client, email)
        assert parked.status_code == 200, parked.text
        assert "<h1>Verify it&#39;s you</h1>" in parked.text
        assert "Use your passkey to finish signing in." in parked.text
        assert passkey_forms(parked) == {"sign-in": "/app/profile"}
        assert "<noscript>" in parked.text
        no_inline_code(parked)
        # No code can finish it: no code form, nothing to resend.
        actions = {f.action for f in forms(parked)}
        assert "/app/mfa" not in actions
        assert "/app/mfa/resend" not in actions
        assert "mfa" in client.cookies
        assert client.get("/app/profile").status_code == 303  # not signed in yet

        # The script's ceremony with the same cookies: the options name the user's passkey.
        options = client.post("/v1/webauthn_login_options", json={})
        assert options.status_code == 200, options.text
        text = options.json()["options"]
        assert len(json.loads(text)["allowCredentials"]) == 1
        done = client.post("/v1/webauthn_login_verify", json={"credential": device.get(text)})
        assert done.status_code == 200, done.text
        profile = client.get("/app/profile")
        assert profile.status_code == 200
        assert email in profile.text


def test_the_code_page_offers_the_passkey_beside_the_authenticator_code(
    passkeys: ServerProcess,
) -> None:
    """A user who set up an authenticator app first is asked for its code; the page offers
    the passkey beside it (``should_offer_webauthn_mfa_verify``), kept past a wrong code."""
    email = unique_email("both")
    with browser(passkeys) as client:
        assert page_signup(client, email).status_code == 303
        sign_out(client)
        enrol = page_login(client, email)
        secret = re.search(r'<code class="secret">([A-Z2-7]+)</code>', enrol.text)
        assert secret is not None, enrol.text
        assert passkey_forms(enrol) == {}  # no passkey yet
        enrolled = submit(client, enrol, "/app/mfa", otp=pyotp.TOTP(secret.group(1)).now())
        assert enrolled.status_code == 303, enrolled.text
        device = device_for(passkeys)
        register(client, device, "Laptop")
        sign_out(client)

        asked = page_login(client, email)
        assert asked.status_code == 200, asked.text
        assert "Authenticator code" in asked.text
        assert '<code class="secret">' not in asked.text  # no second enrolment
        assert form(asked, "/app/mfa").fields["passkey"] == "1"
        assert passkey_forms(asked) == {"sign-in": "/app/profile"}
        assert "Use a passkey instead" in asked.text
        totp = pyotp.TOTP(secret.group(1))
        near = {totp.at(time.time() + step) for step in (-30, 0, 30)}
        wrong_code = next(c for c in ("000000", "111111", "222222", "333333") if c not in near)
        wrong = submit(client, asked, "/app/mfa", otp=wrong_code)
        assert wrong.status_code == 400, wrong.text
        assert passkey_forms(wrong) == {"sign-in": "/app/profile"}

        done = sign_in(client, device)
        assert done.status_code == 200, done.text
        assert email in client.get("/app/profile").text


# -- managing passkeys on the profile ---------------------------------------------------------


def _listing(client: httpx.Client) -> list[dict[str, object]]:
    found = client.post("/v1/webauthn_credentials", json={})
    assert found.status_code == 200, found.text
    return list(found.json()["webauthn_credentials"])


def test_the_profile_lists_renames_and_deletes_passkeys_with_plain_forms(
    passkeys: ServerProcess,
) -> None:
    with browser(passkeys) as client:
        created = page_signup(client, unique_email("manage"))
        assert created.status_code == 303, created.text
        empty = client.get("/app/profile")
        assert "You have no passkey yet." in empty.text
        assert passkey_forms(empty) == {"register": "/app/profile"}
        no_inline_code(empty)

        register(client, device_for(passkeys), "Laptop")
        listed = client.get("/app/profile")
        assert "<strong>Laptop</strong>" in listed.text
        assert "Added " in listed.text

        renamed = submit(client, listed, "/app/passkeys/rename", name="Work laptop")
        assert renamed.status_code == 200, renamed.text
        assert "Passkey renamed." in renamed.text
        assert "<strong>Work laptop</strong>" in renamed.text
        assert [p["name"] for p in _listing(client)] == ["Work laptop"]

        # A form without the page's CSRF token is refused and changes nothing.
        fields = {**form(renamed, "/app/passkeys/rename").fields, "name": "Forged"}
        del fields["csrf_token"]
        assert client.post("/app/passkeys/rename", data=fields).status_code == 403
        assert [p["name"] for p in _listing(client)] == ["Work laptop"]

        # An empty name is the service's refusal, shown on the page.
        blank = submit(client, renamed, "/app/passkeys/rename", name="  ")
        assert blank.status_code == 400
        assert "Id and name are required" in blank.text

        deleted = submit(client, renamed, "/app/passkeys/delete")
        assert deleted.status_code == 200, deleted.text
        assert "Passkey deleted." in deleted.text
        assert "You have no passkey yet." in deleted.text
        assert _listing(client) == []
        again = submit(client, renamed, "/app/passkeys/delete")
        assert again.status_code == 404
        assert "Passkey not found" in again.text


def test_the_profile_has_no_passkey_section_without_passkeys(plain: ServerProcess) -> None:
    with browser(plain) as client:
        assert page_signup(client, unique_email("nopk")).status_code == 303
        profile = client.get("/app/profile")
        assert profile.status_code == 200
        assert "Passkeys" not in profile.text
        assert "<script" not in profile.text
        assert 'href="/app/sessions"' in profile.text
        assert submit(client, profile, "/app/logout").status_code == 200


# -- where the user is signed in --------------------------------------------------------------


def test_the_sessions_page_lists_both_devices_and_signs_the_other_out(
    plain: ServerProcess,
) -> None:
    email = unique_email("devices")
    with browser(plain) as laptop, browser(plain) as phone:
        assert page_signup(laptop, email).status_code == 303
        phone.headers["user-agent"] = "Phone/1.0 (test)"
        assert page_login(phone, email).status_code == 303

        page = laptop.get("/app/sessions")
        assert page.status_code == 200, page.text
        assert "<h1>Where you are signed in</h1>" in page.text
        assert page.text.count("<li>") == 2
        assert page.text.count("This device") == 1
        assert "Phone/1.0 (test)" in page.text
        assert "127.0.0.1" in page.text
        assert re.search(r"\d{2} \w{3} \d{4}, \d{2}:\d{2} UTC", page.text)
        # One sign-out form: for the other session, never the current one.
        revoke = [f for f in forms(page) if f.action == "/app/sessions/revoke"]
        assert len(revoke) == 1
        other = revoke[0].fields["id"]
        mine = [s["id"] for s in laptop.get("/v1/sessions").json()["sessions"] if s["current"]]
        assert other not in mine

        done = submit(laptop, page, "/app/sessions/revoke")
        assert done.status_code == 200, done.text
        assert "That session is signed out." in done.text
        assert done.text.count("<li>") == 1
        assert not [f for f in forms(done) if f.action == "/app/sessions/revoke"]

        # The phone's session ended at once: its pages and the API refuse it.
        assert phone.get("/app/profile").status_code == 303
        assert phone.get("/v1/profile").status_code == 401
        assert laptop.get("/app/profile").status_code == 200

        # Again (already gone), or without the CSRF token: refused, shown on the page.
        again = submit(laptop, page, "/app/sessions/revoke")
        assert again.status_code == 404
        assert "Session not found" in again.text
        forged = {**revoke[0].fields}
        del forged["csrf_token"]
        assert laptop.post("/app/sessions/revoke", data=forged).status_code == 403

        sign_out(laptop)
        gone = laptop.get("/app/sessions")
        assert gone.status_code == 303
        assert gone.headers["location"] == "/app"
