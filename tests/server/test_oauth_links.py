"""The authorize ``state`` survives the flows that span requests: a login that needs an
emailed second factor (bound when ``verify_otp`` succeeds), and a magic link (bound when
the link lands at ``GET /verify_email``). Real SMTP into a mail sink."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, free_port, start_server
from tests.server.test_auth_flows import (
    client_for,
    link_in,
    login,
    mail_flags,
    mails_to,
    signup,
    unique_email,
)
from tests.server.test_mfa_email import code_in, mfa_cookie, with_mfa
from tests.server.test_oauth_flow import location, pkce
from tests.server.test_oauth_surfaces import id_claims


@dataclass
class Env:
    server: ServerProcess
    sink: SpooledMailSink


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("oauth-links")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp)),
        *mail_flags(sink),
        "--app-cookie-secure=false",
        "--enable-magic-link-login",
        "--enable-mfa",
        "--enable-email-otp",
        "--enforce-mfa=false",
    ]
    server = start_server(flags, tmp)
    try:
        yield Env(server, sink)
    finally:
        server.terminate()
        sink.stop()


@pytest.fixture
def client(env: Env) -> Iterator[httpx.Client]:
    with client_for(env.server) as c:
        yield c


def park(server: ServerProcess, client: httpx.Client) -> tuple[str, str, str, str]:
    verifier, challenge = pkce()
    state, nonce = secrets.token_urlsafe(8), secrets.token_urlsafe(8)
    query = {
        "client_id": CLIENT_ID,
        "redirect_uri": f"{server.url}/done",
        "state": state,
        "nonce": nonce,
        "code_challenge": challenge,
    }
    _, params, _ = location(client.get(f"/authorize?{urlencode(query)}"))
    return state, nonce, params["code"], verifier


def redeem(server: ServerProcess, code: str, verifier: str) -> httpx.Response:
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "client_id": CLIENT_ID,
        "redirect_uri": f"{server.url}/done",
    }
    return httpx.post(f"{server.url}/oauth/token", data=body)


def test_a_login_finished_by_its_emailed_code_binds_the_state(
    env: Env, client: httpx.Client
) -> None:
    email = unique_email("otp-state")
    assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    state, nonce, code, verifier = park(env.server, client)
    challenged = login(client, email, state=state)
    assert challenged.json()["should_show_email_otp_screen"] is True
    assert redeem(env.server, code, verifier).status_code == 400  # no tokens yet, nothing bound
    (mail,) = mails_to(env.sink, email)
    done = client.post(
        "/v1/verify_otp",
        json={"otp": code_in(mail), "email": email},
        headers=with_mfa(mfa_cookie(challenged)),
    )
    assert done.status_code == 200, done.text
    assert id_claims(done.json()["id_token"])["nonce"] == nonce
    token = redeem(env.server, code, verifier)
    assert token.status_code == 200, token.text
    assert id_claims(token.json()["id_token"])["email"] == email


def test_a_magic_link_with_the_state_binds_it_when_it_lands(env: Env, client: httpx.Client) -> None:
    email = unique_email("magic-state")
    state, _, code, verifier = park(env.server, client)
    sent = client.post("/v1/magic_link_login", json={"email": email, "state": state})
    assert sent.status_code == 200
    (mail,) = mails_to(env.sink, email)
    landing = client.get(link_in(mail).removeprefix(env.server.url), follow_redirects=False)
    assert landing.status_code == 307
    token = redeem(env.server, code, verifier)
    assert token.status_code == 200, token.text
    claims = id_claims(token.json()["id_token"])
    assert (claims["email"], claims["login_method"]) == (email, "magic_link_login")
