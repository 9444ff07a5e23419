"""The SMTP client against a real SMTP server: plain, STARTTLS and implicit TLS, with login."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bastion.core.settings import settings_from_flags
from bastion.service.mail import Mail, MailError, SmtpMailer
from tests.mailsink import SpooledMailSink, self_signed
from tests.server.harness import free_port

BASE = {
    "admin-secret": "a",
    "client-id": "c",
    "client-secret": "s",
    "database-type": "sqlite",
    "database-url": "./x.db",
    "jwt-type": "HS256",
    "jwt-secret": "secret",
}


def _mailer(port: int, **extra: str) -> SmtpMailer:
    # Built directly: the smtp flags are refused by the CLI until the mail flows land.
    settings = settings_from_flags(BASE)
    fields = {
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "smtp_sender_email": "no-reply@bastion.test",
        "smtp_sender_name": "Bastion",
        **extra,
    }
    return SmtpMailer(type(settings)(**{**_asdict(settings), **fields}))


def _asdict(settings: object) -> dict[str, object]:
    return {name: getattr(settings, name) for name in settings.__slots__}  # type: ignore[attr-defined]


def _send(mailer: SmtpMailer) -> None:
    trio.run(mailer.send, MAIL)


MAIL = Mail(to="ann@example.test", subject="Hello", html="<p>Hi <b>Ann</b></p>", text="Hi Ann")


def test_plain_delivery(tmp_path: Path) -> None:
    port = free_port()
    with SpooledMailSink(port, tmp_path) as sink:
        _send(_mailer(port))
        (message,) = sink.wait_for(1)
    assert message["To"] == "ann@example.test"
    assert message["Subject"] == "Hello"
    assert message["From"] == "Bastion <no-reply@bastion.test>"
    html = message.get_body(("html",))
    assert html is not None
    assert "<b>Ann</b>" in html.get_content()


def test_starttls_with_login(tmp_path: Path) -> None:
    port = free_port()
    tls = self_signed(tmp_path)
    with SpooledMailSink(port, tmp_path / "m", tls=tls, credentials=("mailer", "pw")) as sink:
        _send(_mailer(port, smtp_username="mailer", smtp_password="pw", skip_tls_verification=True))
        assert len(sink.wait_for(1)) == 1


def test_certificate_checked_unless_told_otherwise(tmp_path: Path) -> None:
    port = free_port()
    sink = SpooledMailSink(port, tmp_path / "m", tls=self_signed(tmp_path))
    with sink, pytest.raises(MailError, match="CERTIFICATE_VERIFY_FAILED"):
        _send(_mailer(port))


def test_unreachable_relay() -> None:
    with pytest.raises(MailError):
        _send(_mailer(free_port()))
