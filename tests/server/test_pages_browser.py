"""The hosted login pages in a real browser: headless Chromium (Debian's ``chromium``)
driven by playwright-core from ``tests/browser/drive.mjs``, against a real server on
SQLite with real SMTP into a mail sink.

The script signs up, signs out, is refused a wrong password, signs in with the code from
the real mail, resets the password by the link in the real mail, signs in again and signs
out, by clicking and typing; axe-core checks every page (no serious or critical
violation), no page may break its Content-Security-Policy or load from another origin,
and screenshots land in ``test-artifacts/browser/``.

Chromium, Node.js and npm are required, not optional: without them this test fails
(``.ci/run`` installs them).
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.node_project import node_for
from tests.server.harness import ServerProcess, base_flags, free_port, running
from tests.server.test_auth_flows import mail_flags, mails_to

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "tests" / "browser"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
STEPS = [
    "login",
    "signup",
    "signup-error",
    "profile-after-signup",
    "signed-out",
    "login-refused",
    "mfa-email-code",
    "profile-after-mfa",
    "forgot-password",
    "reset-link-sent",
    "reset-password",
    "password-saved",
    "signed-out-at-last",
]


@pytest.fixture(scope="module")
def node() -> str:
    """``node``, with playwright-core and axe-core installed from package-lock.json."""
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is not installed (apt-get install chromium)")
    installed = PROJECT / "node_modules" / "playwright-core" / "package.json"
    return node_for(PROJECT, installed, "the login page browser test needs it")


@pytest.fixture(scope="module")
def sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpooledMailSink]:
    tmp = tmp_path_factory.mktemp("pages-browser-mail")
    mail = SpooledMailSink(free_port(), tmp / "mail")
    mail.start()
    try:
        yield mail
    finally:
        mail.stop()


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, sink: SpooledMailSink
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("pages-browser")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp, "browser")),
        *mail_flags(sink),
        # Chromium keeps Secure cookies from http://127.0.0.1 (a trustworthy origin),
        # so the production default stays on.
        "--enable-mfa",
        "--enable-email-otp",  # --enforce-mfa defaults to true: every login needs the code
        "--organization-name=Browser Test Org",
    ]
    with running(flags, tmp) as srv:
        yield srv


def _mail_body(mail: EmailMessage) -> str:
    body = mail.get_body(preferencelist=("html", "plain"))
    assert body is not None
    return str(body.get_content()).replace("&amp;", "&")


class Mailbox:
    """Answers the script's questions from the mails the sink received, newest unread."""

    def __init__(self, sink: SpooledMailSink) -> None:
        self.sink = sink
        self.read: dict[str, int] = {}

    def next_mail(self, address: str) -> EmailMessage:
        count = self.read.get(address, 0) + 1
        self.read[address] = count
        return mails_to(self.sink, address, count)[count - 1]

    def answer(self, need: dict[str, str]) -> str:
        body = _mail_body(self.next_mail(need["to"]))
        if need["need"] == "code":
            match = re.search(r"\b(\d{6})\b", body)
        else:
            match = re.search(
                r"https?://[^\s\"'<>]*" + re.escape(need["path"]) + r"[^\s\"'<>]*", body
            )
        assert match is not None, body
        return match.group(1) if need["need"] == "code" else match.group(0)


def test_signup_login_mfa_reset_and_logout_in_chromium(
    node: str, server: ServerProcess, sink: SpooledMailSink
) -> None:
    email = f"browser-{uuid.uuid4().hex[:10]}@example.com"
    mailbox = Mailbox(sink)
    steps: list[str] = []
    done = False
    with subprocess.Popen(
        [node, "drive.mjs", server.url, str(ARTIFACTS), email, "Str0ng!pass", "N3w!pass-word"],
        cwd=PROJECT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        try:
            for line in process.stdout:
                message = json.loads(line)
                if "need" in message:
                    process.stdin.write(mailbox.answer(message) + "\n")
                    process.stdin.flush()
                elif "step" in message:
                    steps.append(message["step"])
                elif message.get("done"):
                    done = True
                    process.stdin.close()
            process.wait(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr = process.stderr.read()
    assert process.returncode == 0, f"after steps {steps}:\n{stderr}\n{server.stderr()}"
    assert done
    assert steps == STEPS
    for number, name in enumerate(STEPS, start=1):
        assert (ARTIFACTS / f"{number:02d}-{name}.png").stat().st_size > 0
