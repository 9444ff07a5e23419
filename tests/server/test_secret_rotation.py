"""Rotating the admin and client secrets without a flag day (issue 42): with
``--admin-secret-previous`` and ``--client-secret-previous`` the replaced secrets keep
working (admin header, admin cookie, a relying party's client authentication, TOTP
secrets sealed under the old client secret, which are sealed again when read); once the
previous flags are removed the old secrets are refused and authenticators still work.
``--webhook-secret`` signs webhooks instead of the client secret."""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path

import httpx

from bastion.cli import parse_args
from bastion.service.admin import webhook_sender
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, CLIENT_ID, CLIENT_SECRET, base_flags, running
from tests.server.test_auth_flows import login
from tests.server.test_mfa_totp import challenge, code_at, current_step, enrol, verify

NEW_ADMIN = "a-new-admin-secret-for-the-rotation"
NEW_CLIENT = "a-new-client-secret-for-the-rotation"


def flags(database: str, admin: str, client: str, *extra: str) -> list[str]:
    replaced = {"--admin-secret": admin, "--client-secret": client}
    given = [
        f"{flag.split('=', 1)[0]}={replaced[flag.split('=', 1)[0]]}"
        if flag.split("=", 1)[0] in replaced
        else flag
        for flag in base_flags("sqlite", database)
    ]
    return [*given, "--app-cookie-secure=false", "--enable-mfa", "--enable-totp-login", *extra]


def admin_status(url: str, secret: str = "", cookie: str = "") -> int:
    headers = {"origin": url, **({"x-service-admin-secret": secret} if secret else {})}
    cookies = {"service-admin": cookie} if cookie else None
    answer = httpx.post(
        f"{url}/v1/admin/email_templates", json={}, headers=headers, cookies=cookies, timeout=30
    )
    return answer.status_code


def introspection_status(url: str, secret: str) -> int:
    answer = httpx.post(
        f"{url}/oauth/introspect", data={"token": "x"}, auth=(CLIENT_ID, secret), timeout=30
    )
    return answer.status_code


def totp_login(url: str, email: str, secret: str, after_step: int) -> int:
    """A login with the code of the first time step after ``after_step`` (a step's code
    is accepted once: the next login waits for the next step)."""
    while current_step() <= after_step:
        time.sleep(0.5)
    with httpx.Client(base_url=url, headers={"origin": url}, timeout=30) as client:
        body, cookie = challenge(client, email)
        assert body.get("should_show_totp_screen"), body
        return verify(client, email, code_at(secret, current_step()), cookie).status_code


def test_admin_and_client_secrets_rotate_without_a_flag_day(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path, "rotation")
    before = flags(database, ADMIN_SECRET, CLIENT_SECRET)
    with running(before, tmp_path, name="before") as old, old.client() as client:
        enrolled = enrol(client)
        admin_login = client.post("/v1/admin/login", json={"admin_secret": ADMIN_SECRET})
        admin_cookie = str(admin_login.cookies["service-admin"])
    rotating = flags(database, NEW_ADMIN, NEW_CLIENT,
                     f"--admin-secret-previous={ADMIN_SECRET}",
                     f"--client-secret-previous={CLIENT_SECRET}")  # fmt: skip
    with running(rotating, tmp_path, name="rotating") as server:
        for secret in (ADMIN_SECRET, NEW_ADMIN):
            assert admin_status(server.url, secret) == 200
        assert admin_status(server.url, cookie=admin_cookie) == 200
        assert admin_status(server.url, "wrong") == 401
        assert introspection_status(server.url, CLIENT_SECRET) == 200
        assert introspection_status(server.url, NEW_CLIENT) == 200
        assert introspection_status(server.url, "wrong") == 401
        assert totp_login(server.url, enrolled.email, enrolled.secret, enrolled.step) == 200
        used = current_step()
    with running(flags(database, NEW_ADMIN, NEW_CLIENT), tmp_path, name="after") as server:
        assert admin_status(server.url, ADMIN_SECRET) == 401
        assert admin_status(server.url, NEW_ADMIN) == 200
        assert introspection_status(server.url, CLIENT_SECRET) == 401
        # sealed again under the new client secret when the rotating server read it
        with httpx.Client(base_url=server.url, headers={"origin": server.url}) as client:
            assert login(client, enrolled.email).json().get("should_show_totp_screen")
        assert totp_login(server.url, enrolled.email, enrolled.secret, used) == 200


def test_webhooks_are_signed_with_their_own_secret_when_given() -> None:
    base = base_flags("sqlite", "unused.db")
    body = b'{"event_name":"user.login"}'
    own = "hooks-only-secret-xx"
    for extra, key in (([], CLIENT_SECRET), ([f"--webhook-secret={own}"], own)):
        headers = webhook_sender(parse_args([*base, *extra])).headers(body, {}, None)
        stamp = headers["X-Authorizer-Timestamp"]
        expected = hmac.new(key.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        assert headers["X-Authorizer-Signature"] == expected
