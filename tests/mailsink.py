"""A real SMTP server (aiosmtpd) for tests, run in a child process of its own.

aiosmtpd runs an asyncio loop; in a test process that also runs trio-asyncio (PostgreSQL
storage opened in-process) the two loop policies collide, so tests always use
:class:`SpooledMailSink`, which runs :class:`MailSink` in a child and spools each mail
received to a directory as an ``.eml`` file.
"""

from __future__ import annotations

import contextlib
import datetime
import email
import email.policy
import ipaddress
import socket
import ssl
import subprocess
import sys
import threading
import time
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


class SpooledMailSink:
    """The same SMTP server in a child process, spooling each mail to ``directory``.

    For tests whose own process runs trio-asyncio (PostgreSQL storage opened in-process):
    aiosmtpd's asyncio loop and trio-asyncio's loop policy do not share a process well.
    """

    def __init__(
        self,
        port: int,
        directory: Path,
        *,
        tls: tuple[Path, Path] | None = None,
        implicit_tls: bool = False,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.port = port
        self.directory = directory
        self._options: list[str] = []
        if tls is not None:
            self._options += ["--implicit-tls" if implicit_tls else "--starttls", *map(str, tls)]
        if credentials is not None:
            self._options += ["--auth", ":".join(credentials)]
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SpooledMailSink:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mailsink",
                str(self.port),
                str(self.directory),
                *self._options,
            ],
            cwd=Path(__file__).resolve().parents[1],
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("mail sink did not start")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)

    def messages(self) -> list[EmailMessage]:
        found = []
        for path in sorted(self.directory.glob("*.eml")):
            message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            assert isinstance(message, EmailMessage)
            found.append(message)
        return found

    def wait_for(self, count: int = 1, timeout: float = 30) -> list[EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.messages()
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"expected {count} mail(s), got {len(self.messages())}")


def _spool_forever(argv: list[str]) -> None:
    port, directory = int(argv[0]), Path(argv[1])
    options = argv[2:]
    kwargs: dict[str, Any] = {}
    for flag in ("--starttls", "--implicit-tls"):
        if flag in options:
            at = options.index(flag)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(options[at + 1], options[at + 2])
            kwargs.update(tls=context, implicit_tls=flag == "--implicit-tls")
    if "--auth" in options:
        user, _, password = options[options.index("--auth") + 1].partition(":")
        kwargs["credentials"] = (user, password)
    sink = MailSink(port, **kwargs)
    sink.start()
    written = 0
    try:
        while True:
            with sink.lock:
                pending = sink.messages[written:]
            for message in pending:
                written += 1
                target = directory / f"{written:06d}.eml"
                target.with_suffix(".tmp").write_bytes(message.as_bytes())
                target.with_suffix(".tmp").rename(target)
            time.sleep(0.02)
    finally:
        sink.stop()


if __name__ == "__main__":
    _spool_forever(sys.argv[1:])
