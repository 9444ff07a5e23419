"""The sign-up/login switches, mail settings and token lifetimes, each on a real server.

One SQLite database: a first server creates the accounts, then servers with the
switches off reuse it (the flags change behaviour, not data).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink, self_signed
from tests.server.harness import CLIENT_ID, base_flags, free_port, running
from tests.server.test_auth_flows import (
    PASSWORD,
    client_for,
    link_in,
    login,
    mails_to,
    new_user,
    signup,
    unique_email,
)
from tests.server.test_auth_tokens import _claims


def _phone_signup(client: httpx.Client, phone: str) -> None:
    response = client.post(
        "/v1/signup",
        json={"phone_number": phone, "password": PASSWORD, "confirm_password": PASSWORD},
    )
    assert response.status_code == 200, response.text


def test_switches_mail_settings_and_lifetimes(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path)
    base = base_flags("sqlite", database)
    phone = "+15550002222"
    with running(base, tmp_path, name="open") as srv, client_for(srv) as client:
        email, _ = new_user(client)
        _phone_signup(client, phone)

    sink = SpooledMailSink(
        free_port(), tmp_path / "mail", tls=self_signed(tmp_path), credentials=("mailer", "pw")
    )
    reset_base = "http://127.0.0.1:9/reset-here"
    locked = [
        *base,
        "--enable-signup=false",
        "--enable-mobile-basic-authentication=false",
        "--enable-magic-link-login",
        f"--reset-password-url={reset_base}",
        "--refresh-token-expires-in=120",
        "--organization-logo=https://logo.example/acme.png",
        "--smtp-host=127.0.0.1",
        f"--smtp-port={sink.port}",
        "--smtp-username=mailer",
        "--smtp-password=pw",
        "--smtp-sender-email=auth@example.com",
        "--smtp-sender-name=Acme Auth",
        "--smtp-local-name=bastion.test",
        "--skip-tls-verification",
    ]
    with sink, running(locked, tmp_path, name="locked") as srv, client_for(srv) as client:
        refused = signup(client, unique_email())
        assert refused.status_code == 400
        assert refused.json() == {
            "code": "failed_precondition",
            "message": "signup is disabled for this instance",
        }
        magic = client.post("/v1/magic_link_login", json={"email": unique_email()})
        assert magic.json()["message"] == "signup is disabled for this instance"
        by_phone = client.post("/v1/login", json={"phone_number": phone, "password": PASSWORD})
        assert by_phone.json()["message"] == (
            "mobile basic authentication is disabled for this instance"
        )
        tokens = login(client, email, scope=["openid", "offline_access"]).json()
        claims = _claims(tokens["refresh_token"])
        assert claims["exp"] - claims["iat"] == 120
        assert claims["aud"] == CLIENT_ID
        assert client.post("/v1/forgot_password", json={"email": email}).status_code == 200
        (mail,) = mails_to(sink, email)
        assert mail["From"] == "Acme Auth <auth@example.com>"
        assert link_in(mail).startswith(f"{reset_base}?token=")
        html = mail.get_body(preferencelist=("html",))
        assert html is not None
        assert "https://logo.example/acme.png" in html.get_content()

    nobasic = [*base, "--enable-basic-authentication=false"]
    with running(nobasic, tmp_path, name="nobasic") as srv, client_for(srv) as client:
        assert login(client, email).json()["message"] == (
            "basic authentication is disabled for this instance"
        )
        assert (
            client.post("/v1/login", json={"phone_number": phone, "password": PASSWORD}).status_code
            == 200
        )
