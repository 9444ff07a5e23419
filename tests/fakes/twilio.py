"""A local stand-in for Twilio's Messages API, for SMS tests (a threaded ``http.server``).

It speaks the part of the API bastion uses: ``POST /2010-04-01/Accounts/{AccountSid}/
Messages.json`` with form fields ``To``/``From``/``Body`` and HTTP Basic auth (API key
SID + secret, or account SID + auth token), answering 201 with a message resource, or
Twilio's error JSON ``{code, message, more_info, status}`` (401 code 20003 for bad
credentials, 404 code 20404 for another account or path, 400 codes 21602/21603/21604 for a
missing Body/From/To, 21211 for a To that is not E.164). It records each accepted message
and can be scripted to fail the next requests (``fail_next``).

In process::

    with FakeTwilio() as twilio:
        ... --sms-api-url twilio.url --sms-account-sid twilio.account_sid ...
        twilio.wait_for(1)[0]["Body"]

Standalone (e.g. beside a ``bastion`` process), writing each message as JSON to a
directory, as ``tests/mailsink.py`` spools mail::

    python -m tests.fakes.twilio PORT SPOOL_DIR [ACCOUNT_SID API_KEY API_SECRET]

:class:`SpooledTwilio` runs that in a child process and reads the directory back.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import json
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

__all__ = ["ACCOUNT_SID", "API_KEY", "API_SECRET", "FakeTwilio", "SpooledTwilio"]

ACCOUNT_SID = "AC" + "0" * 31 + "1"
API_KEY = "SK" + "0" * 31 + "2"
API_SECRET = "fake-twilio-secret"
_E164 = re.compile(r"\A\+[1-9][0-9]{6,14}\Z")
_PATH = re.compile(r"\A/2010-04-01/Accounts/(?P<sid>[^/]+)/Messages\.json\Z")


def twilio_error(status: int, code: int, message: str) -> dict[str, Any]:
    return {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }


class FakeTwilio:
    def __init__(
        self,
        *,
        account_sid: str = ACCOUNT_SID,
        api_key: str = API_KEY,
        api_secret: str = API_SECRET,
        port: int = 0,
        spool: Path | None = None,
    ) -> None:
        self.account_sid = account_sid
        self.api_key = api_key
        self.api_secret = api_secret
        self.spool = spool
        #: every accepted message: the form fields plus ``sid`` and ``account_sid``
        self.messages: list[dict[str, str]] = []
        #: every request, accepted or not: (method, path, status answered)
        self.requests: list[tuple[str, str, int]] = []
        #: scripted answers, consumed one per request: (status, error code, message)
        self.script: list[tuple[int, int, str]] = []
        self.lock = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The value for ``--sms-api-url``."""
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, status: int, code: int, message: str, times: int = 1) -> None:
        with self.lock:
            self.script.extend([(status, code, message)] * times)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FakeTwilio:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, count: int = 1, timeout: float = 30) -> list[dict[str, str]]:
        with self.lock:
            if not self.lock.wait_for(lambda: len(self.messages) >= count, timeout):
                raise AssertionError(f"expected {count} SMS, got {len(self.messages)}")
            return list(self.messages)

    # -- the API ---------------------------------------------------------------------------

    def answer(
        self, method: str, path: str, authorization: str | None, form: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        status, body = self._decide(method, path, authorization, form)
        with self.lock:
            self.requests.append((method, path, status))
            if status == 201:
                self.messages.append({**form, "sid": body["sid"], "account_sid": self.account_sid})
                self._write_spool(body)
            self.lock.notify_all()
        return status, body

    def _decide(
        self, method: str, path: str, authorization: str | None, form: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        match = _PATH.match(path)
        if method != "POST" or match is None:
            return 404, twilio_error(404, 20404, f"The requested resource {path} was not found")
        if not self._authorised(authorization):
            return 401, twilio_error(401, 20003, "Authenticate")
        if match["sid"] != self.account_sid:
            return 404, twilio_error(404, 20404, f"The requested resource {path} was not found")
        with self.lock:
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            status, code, message = scripted
            return status, twilio_error(status, code, message)
        for field, code in (("To", 21604), ("From", 21603), ("Body", 21602)):
            if not form.get(field):
                what = "Message body" if field == "Body" else f"A '{field}' phone number"
                return 400, twilio_error(400, code, f"{what} is required.")
        if not _E164.match(form["To"]):
            message = f"The 'To' number {form['To']} is not a valid phone number."
            return 400, twilio_error(400, 21211, message)
        return 201, self._resource(form)

    def _authorised(self, authorization: str | None) -> bool:
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            decoded = base64.b64decode(authorization[6:], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, _, password = decoded.partition(":")
        return hmac.compare_digest(user, self.api_key) and hmac.compare_digest(
            password, self.api_secret
        )

    def _resource(self, form: dict[str, str]) -> dict[str, Any]:
        sid = "SM" + secrets.token_hex(16)
        now = formatdate(usegmt=True)
        uri = f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}"
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": form["Body"],
            "date_created": now,
            "date_sent": None,
            "date_updated": now,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": form["From"],
            "messaging_service_sid": None,
            "num_media": "0",
            "num_segments": "1",
            "price": None,
            "price_unit": "USD",
            "sid": sid,
            "status": "queued",
            "subresource_uris": {"media": f"{uri}/Media.json"},
            "to": form["To"],
            "uri": f"{uri}.json",
        }

    def _write_spool(self, resource: dict[str, Any]) -> None:
        if self.spool is None:
            return
        target = self.spool / f"{len(self.messages):06d}.json"
        record = {
            "sid": resource["sid"],
            "account_sid": self.account_sid,
            "To": resource["to"],
            "From": resource["from"],
            "Body": resource["body"],
        }
        target.with_suffix(".tmp").write_text(json.dumps(record))
        target.with_suffix(".tmp").rename(target)


def _handler_for(fake: FakeTwilio) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            form: dict[str, str] = {}
            if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            self._reply(*fake.answer("POST", self.path, self.headers.get("Authorization"), form))

        def do_GET(self) -> None:
            self._reply(*fake.answer("GET", self.path, self.headers.get("Authorization"), {}))

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="Twilio API"')
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


class SpooledTwilio:
    """The fake in a child process (``python -m tests.fakes.twilio``), spooling each
    message to ``directory`` as JSON; for tests that run bastion as a separate process."""

    def __init__(
        self,
        port: int,
        directory: Path,
        *,
        account_sid: str = ACCOUNT_SID,
        api_key: str = API_KEY,
        api_secret: str = API_SECRET,
    ) -> None:
        self.port = port
        self.directory = directory
        self.account_sid = account_sid
        self.api_key = api_key
        self.api_secret = api_secret
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> SpooledTwilio:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        credentials = [self.account_sid, self.api_key, self.api_secret]
        module = [sys.executable, "-m", "tests.fakes.twilio"]
        self._process = subprocess.Popen(
            [*module, str(self.port), str(self.directory), *credentials],
            cwd=Path(__file__).resolve().parents[2],
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 1),
            ):
                return
            time.sleep(0.05)
        raise RuntimeError("fake Twilio did not start")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)

    def messages(self) -> list[dict[str, str]]:
        return [json.loads(p.read_text()) for p in sorted(self.directory.glob("*.json"))]

    def wait_for(self, count: int = 1, timeout: float = 30) -> list[dict[str, str]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.messages()
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"expected {count} SMS, got {len(self.messages())}")


def _serve_forever(argv: list[str]) -> None:
    port, directory = int(argv[0]), Path(argv[1])
    directory.mkdir(parents=True, exist_ok=True)
    credentials: dict[str, str] = {}
    if len(argv) >= 5:
        credentials = {"account_sid": argv[2], "api_key": argv[3], "api_secret": argv[4]}
    fake = FakeTwilio(port=port, spool=directory, **credentials)
    try:
        fake._server.serve_forever()
    finally:
        fake._server.server_close()


if __name__ == "__main__":
    _serve_forever(sys.argv[1:])
