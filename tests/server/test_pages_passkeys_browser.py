"""Passkeys on the hosted pages in a real browser (issue 22): headless Chromium driven by
playwright-core from ``tests/browser/passkeys.mjs``, with a virtual authenticator from the
DevTools protocol, against a real server enforcing MFA with passkeys on.

The script signs up with a password, adds a passkey on the profile page, signs out,
signs in with the passkey alone, visits the sessions page, signs out, then signs in with
the password and answers the second factor with the passkey; with JavaScript off the
login page has no passkey button and its password form. No page may break its CSP, log
an error or load from another origin; axe-core checks each page. Screenshots land in
``test-artifacts/browser/``.

``--url`` names ``localhost``: WebAuthn refuses an IP address as the relying-party id.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ServerProcess, base_flags, free_port, running
from tests.server.test_pages_browser import ARTIFACTS, PROJECT, node  # noqa: F401 (fixture)

STEPS = [
    "login",
    "profile-without-passkey",
    "profile-with-passkey",
    "profile-after-passkey",
    "sessions",
    "mfa-passkey",
    "profile-after-mfa",
    "login-without-javascript",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("pages-passkeys-browser")
    port = free_port()
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp, "passkeys-browser")),
        f"--url=http://localhost:{port}",
        "--enable-passkeys",
        "--enable-mfa",
        "--enforce-mfa",
        # The only code method; a user with a passkey is parked for it instead of enrolling.
        "--enable-totp-login",
        "--organization-name=Passkey Test Org",
    ]
    with running(flags, tmp, http_port=port) as srv:
        yield srv


def test_passkey_sign_up_sign_in_and_second_factor_in_chromium(
    node: str,  # noqa: F811 (the fixture imported above)
    server: ServerProcess,
) -> None:
    email = f"passkey-{uuid.uuid4().hex[:10]}@example.com"
    base = f"http://localhost:{server.http_port}"
    finished = subprocess.run(
        [node, "passkeys.mjs", base, str(ARTIFACTS), email, "Str0ng!pass"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    messages = [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
    steps = [m["step"] for m in messages if "step" in m]
    assert finished.returncode == 0, f"after steps {steps}:\n{finished.stderr}\n{server.stderr()}"
    assert messages[-1] == {"done": True}
    assert steps == STEPS
    for number, name in enumerate(STEPS[:-1], start=1):
        assert (ARTIFACTS / f"passkeys-{number:02d}-{name}.png").stat().st_size > 0
