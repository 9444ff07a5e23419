"""Sending mail over SMTP, from a worker thread (smtplib is blocking).

TLS: port 465 speaks TLS from the first byte (implicit TLS); any other port upgrades
with STARTTLS when the server offers it. ``--skip-tls-verification`` turns certificate
checks off, for test relays with self-signed certificates only. Callers do not send
directly: mail goes through the outbox, which retries this until it succeeds.
"""

from __future__ import annotations

import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formataddr, make_msgid

import trio

from bastion.core.settings import Settings

IMPLICIT_TLS_PORT = 465
SMTP_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Mail:
    to: str
    subject: str
    html: str
    text: str = ""


class MailError(Exception):
    """The relay refused or could not be reached; the outbox will try again."""


class SmtpMailer:
    def __init__(self, settings: Settings) -> None:
        self._host = settings.smtp_host
        self._port = settings.smtp_port
        self._username = settings.smtp_username
        self._password = settings.smtp_password
        self._sender = formataddr((settings.smtp_sender_name, settings.smtp_sender_email))
        self._sender_domain = settings.smtp_sender_email.rpartition("@")[2] or None
        self._local_name = settings.smtp_local_name or None
        self._tls = ssl.create_default_context()
        if settings.skip_tls_verification:
            self._tls.check_hostname = False
            self._tls.verify_mode = ssl.CERT_NONE
        self._limiter = trio.CapacityLimiter(4)

    async def send(self, mail: Mail) -> None:
        await trio.to_thread.run_sync(self._send_sync, mail, limiter=self._limiter)

    def _message(self, mail: Mail) -> EmailMessage:
        message = EmailMessage()
        message["From"] = self._sender
        message["To"] = mail.to
        message["Subject"] = mail.subject
        message["Message-ID"] = make_msgid(domain=self._sender_domain)
        message.set_content(mail.text or "This message needs an HTML-capable mail reader.")
        message.add_alternative(mail.html, subtype="html")
        return message

    def _send_sync(self, mail: Mail) -> None:
        try:
            if self._port == IMPLICIT_TLS_PORT:
                client: smtplib.SMTP = smtplib.SMTP_SSL(
                    self._host,
                    self._port,
                    local_hostname=self._local_name,
                    timeout=SMTP_TIMEOUT_SECONDS,
                    context=self._tls,
                )
            else:
                client = smtplib.SMTP(
                    self._host,
                    self._port,
                    local_hostname=self._local_name,
                    timeout=SMTP_TIMEOUT_SECONDS,
                )
            with client:
                client.ehlo()
                if self._port != IMPLICIT_TLS_PORT and client.has_extn("starttls"):
                    client.starttls(context=self._tls)
                    client.ehlo()
                if self._username:
                    client.login(self._username, self._password)
                client.send_message(self._message(mail))
        except (OSError, smtplib.SMTPException) as exc:
            # The exception text can echo server replies, never our credentials.
            raise MailError(f"{type(exc).__name__}: {exc}") from None
