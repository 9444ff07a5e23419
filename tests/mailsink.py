"""A real SMTP server in the test process (aiosmtpd), recording what it receives."""

from __future__ import annotations

import contextlib
import datetime
import email
import email.policy
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "smtp.crt", tmp / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Handler:
    def __init__(self, sink: MailSink) -> None:
        self.sink = sink

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        raw = envelope.original_content or envelope.content
        assert isinstance(raw, bytes)
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self.sink.lock:
            self.sink.messages.append(message)
        return "250 OK"


class MailSink:
    def __init__(
        self,
        port: int,
        *,
        tls: ssl.SSLContext | None = None,
        implicit_tls: bool = False,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.messages: list[EmailMessage] = []
        self.lock = threading.Lock()
        kwargs: dict[str, Any] = {}
        if credentials is not None:

            def authenticate(
                server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
            ) -> AuthResult:
                ok = (
                    isinstance(auth_data, LoginPassword)
                    and (auth_data.login.decode(), auth_data.password.decode()) == credentials
                )
                return AuthResult(success=ok)

            kwargs.update(
                authenticator=authenticate, auth_require_tls=False, auth_exclude_mechanism=["LOGIN"]
            )
        if tls is not None and not implicit_tls:
            kwargs.update(tls_context=tls, require_starttls=True)
        self.port = port
        self._controller = Controller(
            _Handler(self),
            hostname="127.0.0.1",
            port=port,
            ssl_context=tls if implicit_tls else None,
            **kwargs,
        )

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def wait_for(self, count: int = 1, timeout: float = 30) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.messages) >= count:
                    return list(self.messages)
            time.sleep(0.05)
        raise AssertionError(f"expected {count} mail(s), got {len(self.messages)}")


@contextlib.contextmanager
def mail_sink(port: int, **kwargs: Any) -> Iterator[MailSink]:
    sink = MailSink(port, **kwargs)
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()
