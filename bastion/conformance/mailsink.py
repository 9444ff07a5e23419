"""A mail sink the suite starts itself: a tiny SMTP server (stdlib, daemon threads).

``--mail-sink HOST:PORT`` binds it; the deployment under test must send its mail there
(``--smtp-host HOST --smtp-port PORT``, no TLS, no login). Mail is kept per recipient; a
scenario takes the emailed link's token out of the next mail for its own unique user.
Threads, not asyncio: the suite also runs inside test processes that use trio-asyncio.
"""

from __future__ import annotations

import base64
import email
import email.policy
import json
import re
import socketserver
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage
from urllib.parse import parse_qs, urlsplit

from bastion.conformance.sinks import Registry, Running, parse_address

#: Longest a scenario waits for a mail (the deployment sends through its outbox).
MAIL_TIMEOUT_SECONDS = 30.0
_URL = re.compile(r"https?://[^\s\"'<>]+")
_ADDRESS = re.compile(r"<([^>]*)>")
_CODE = re.compile(r"(?<![\d#])(\d{6})(?!\d)")


class NoMail(Exception):
    """No matching mail reached the sink in time."""


@dataclass
class MailSink:
    host: str
    port: int
    #: recipient (lower case) -> mails received, in arrival order
    received: dict[str, list[EmailMessage]] = field(default_factory=dict)
    #: recipient -> mails already handed to a scenario
    _taken: dict[str, set[int]] = field(default_factory=dict)
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def deliver(self, recipients: list[str], raw: bytes) -> None:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        with self._changed:
            for rcpt in recipients:
                self.received.setdefault(rcpt.lower(), []).append(message)
            self._changed.notify_all()

    def next_token(
        self, recipient: str, token_type: str, timeout: float = MAIL_TIMEOUT_SECONDS
    ) -> str:
        """The token of the next mail to ``recipient`` whose link's token is a
        ``token_type`` token (``basic_auth_signup``, ``forgot_password``, ...)."""
        deadline = time.monotonic() + timeout
        recipient = recipient.lower()
        with self._changed:
            while True:
                taken = self._taken.setdefault(recipient, set())
                for index, message in enumerate(self.received.get(recipient, [])):
                    token = link_token(message)
                    if index not in taken and token and token_kind(token) == token_type:
                        taken.add(index)
                        return token
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoMail(
                        f"no {token_type} mail to {recipient} reached the sink at "
                        f"{self.host}:{self.port} within {timeout:g} s (is the deployment's "
                        f"--smtp-host/--smtp-port pointed at it?)"
                    )
                self._changed.wait(left)

    def next_code(self, recipient: str, timeout: float = MAIL_TIMEOUT_SECONDS) -> str:
        """The one-time code (6 digits, no link) of the next such mail to ``recipient``."""
        deadline = time.monotonic() + timeout
        recipient = recipient.lower()
        with self._changed:
            while True:
                taken = self._taken.setdefault(recipient, set())
                for index, message in enumerate(self.received.get(recipient, [])):
                    code = one_time_code(message)
                    if index not in taken and code is not None:
                        taken.add(index)
                        return code
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoMail(
                        f"no one-time code mailed to {recipient} reached the sink at "
                        f"{self.host}:{self.port} within {timeout:g} s"
                    )
                self._changed.wait(left)


def one_time_code(message: EmailMessage) -> str | None:
    """The 6-digit code of a mail that carries one (and no link token), if any."""
    if link_token(message) is not None:
        return None
    for part in message.walk():
        if part.get_content_maintype() != "text":
            continue
        assert isinstance(part, EmailMessage)
        found = _CODE.search(str(part.get_content()))
        if found:
            return found.group(1)
    return None


def link_token(message: EmailMessage) -> str | None:
    """The ``token`` query parameter of the first link in the mail, if any."""
    for part in message.walk():
        if part.get_content_maintype() != "text":
            continue
        assert isinstance(part, EmailMessage)
        for url in _URL.findall(str(part.get_content())):
            tokens = parse_qs(urlsplit(url.replace("&amp;", "&")).query).get("token")
            if tokens:
                return str(tokens[0])
    return None


def token_kind(token: str) -> str | None:
    """The ``token_type`` claim of an emailed link's JWT (read, not verified: the
    deployment verifies it when the scenario hands it back)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    kind = claims.get("token_type") if isinstance(claims, dict) else None
    return kind if isinstance(kind, str) else None


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    sink: MailSink


class _Session(socketserver.StreamRequestHandler):
    """Just enough SMTP for smtplib: EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT."""

    server: _Server

    def _reply(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        self._reply("220 conformance mail sink")
        recipients: list[str] = []
        while line := self.rfile.readline(65536):
            verb = line.decode("ascii", "replace").strip().split(" ", 1)[0].upper()
            if verb == "EHLO":
                self._reply("250-conformance mail sink")
                self._reply("250 8BITMIME")
            elif verb in ("HELO", "NOOP"):
                self._reply("250 ok")
            elif verb in ("MAIL", "RSET"):
                recipients = []
                self._reply("250 ok")
            elif verb == "RCPT":
                found = _ADDRESS.search(line.decode("utf-8", "replace"))
                recipients.append(found.group(1) if found else "")
                self._reply("250 ok")
            elif verb == "DATA":
                self._reply("354 end with <CRLF>.<CRLF>")
                self.server.sink.deliver(recipients, self._data())
                recipients = []
                self._reply("250 ok: queued")
            elif verb == "QUIT":
                self._reply("221 bye")
                return
            else:
                self._reply("502 not implemented")

    def _data(self) -> bytes:
        lines = []
        while (line := self.rfile.readline(1 << 20)) not in (b".\r\n", b".\n", b""):
            lines.append(line[1:] if line.startswith(b"..") else line)
        return b"".join(lines)


_sinks: Registry[MailSink] = Registry()


def current() -> MailSink | None:
    """The sink this run started (``--mail-sink``), or None: mail rows then skip."""
    return _sinks.current()


def start(spec: str) -> Running[MailSink]:
    """Bind ``--mail-sink HOST:PORT`` and serve it until ``stop``."""
    address = parse_address(spec, "--mail-sink")
    server = _Server(address, _Session)
    server.sink = MailSink(*address)
    return Running(_sinks, server, server.sink)
