"""An SMS sink the suite starts itself: a tiny HTTP server speaking the part of the SMS
provider's Messages API (Twilio's) that a deployment uses to text a code.

``--sms-sink HOST:PORT`` binds it; the deployment under test must send its texts there
(``--sms-api-url http://HOST:PORT``; any ``--sms-account-sid``, ``--sms-api-key``,
``--sms-api-secret`` and ``--sms-sender`` are accepted). It answers ``POST
/2010-04-01/Accounts/{sid}/Messages.json`` (form fields ``To``, ``From``, ``Body``, HTTP
Basic credentials required but not checked) with the provider's 201 message resource,
and keeps texts per recipient; a scenario takes the code out of the next text to its own
number. Threads, not asyncio, as the mail sink.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from bastion.conformance.sinks import Registry, Running, parse_address

#: Longest a scenario waits for a text (the deployment sends through its outbox).
SMS_TIMEOUT_SECONDS = 30.0
_PATH = re.compile(r"\A/2010-04-01/Accounts/(?P<sid>[^/]+)/Messages\.json\Z")
_CODE = re.compile(r"\b(\d{6})\b")


class NoText(Exception):
    """No text reached the sink in time."""


@dataclass
class SmsSink:
    host: str
    port: int
    #: recipient -> bodies received, in arrival order
    received: dict[str, list[str]] = field(default_factory=dict)
    #: recipient -> texts already handed to a scenario
    _taken: dict[str, int] = field(default_factory=dict)
    #: set when a wait ran out before the deployment had texted the sink at all
    unreached: str | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def deliver(self, to: str, body: str) -> None:
        with self._changed:
            self.received.setdefault(to, []).append(body)
            self._changed.notify_all()

    def next_code(self, phone: str, timeout: float = SMS_TIMEOUT_SECONDS) -> str:
        """The 6-digit code of the next text to ``phone`` not yet handed out."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                bodies = self.received.get(phone, [])
                taken = self._taken.get(phone, 0)
                if self.unreached is not None and not bodies:
                    raise NoText(self.unreached)  # waited once already: it texts elsewhere
                if taken < len(bodies):
                    self._taken[phone] = taken + 1
                    found = _CODE.search(bodies[taken])
                    if found is None:
                        raise NoText(f"the text to {phone} carries no 6-digit code")
                    return found.group(1)
                left = deadline - time.monotonic()
                if left <= 0:
                    if not self.received:
                        self.unreached = (
                            f"no text from the deployment reached the suite's SMS sink at "
                            f"{self.address}: point its --sms-api-url at "
                            f"http://{self.address}"
                        )
                        raise NoText(self.unreached)
                    raise NoText(
                        f"no text to {phone} reached the SMS sink at {self.address} "
                        f"within {timeout:g} s"
                    )
                self._changed.wait(left)

    def sent_to(self, phone: str) -> int:
        with self._changed:
            return len(self.received.get(phone, []))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sink: SmsSink


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
        match = _PATH.match(self.path)
        if match is None:
            missing = f"The requested resource {self.path} was not found"
            self._reply(404, _error(404, 20404, missing))
        elif not (self.headers.get("Authorization") or "").startswith("Basic "):
            self._reply(401, _error(401, 20003, "Authenticate"))
        elif not (form.get("To") and form.get("From") and form.get("Body")):
            self._reply(400, _error(400, 21604, "To, From and Body are required."))
        else:
            self.server.sink.deliver(form["To"], form["Body"])
            self._reply(201, _resource(match["sid"], form))

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _error(status: int, code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message, "status": status}


def _resource(account_sid: str, form: dict[str, str]) -> dict[str, Any]:
    return {
        "sid": "SM" + secrets.token_hex(16),
        "account_sid": account_sid,
        "to": form["To"],
        "from": form["From"],
        "status": "queued",
    }


_sinks: Registry[SmsSink] = Registry()


def current() -> SmsSink | None:
    """The sink this run started (``--sms-sink``), or None: SMS rows then skip."""
    return _sinks.current()


def start(spec: str) -> Running[SmsSink]:
    """Bind ``--sms-sink HOST:PORT`` and serve it until ``stop``."""
    address = parse_address(spec, "--sms-sink")
    server = _Server(address, _Handler)
    server.sink = SmsSink(*address)
    return Running(_sinks, server, server.sink)
