"""Structured JSON logs on stderr.

Log lines carry event names and bounded facts, and the request id of the request being
served (so an error line joins its access-log line). Passwords, tokens, codes, secrets
and cookie values are never passed to a logger in the first place; as a second line of
defence, a field whose name says it holds one is replaced before it is written. That is
decided by the whole field name, never a substring: ``error_code`` names a kind of
error, ``code`` a one-time code's value.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from bastion.core import log_context
from bastion.core.settings import Settings

#: Field names that hold a secret's value, alone or as the last word (``client_secret``,
#: ``access_token``, ``new_password``, ``api_key``).
_SECRET_WORDS = frozenset({"password", "secret", "token", "otp", "cookie", "key", "verifier"})
#: Names that hold one only as a whole (``error_code`` is a kind of error, not a code).
_SECRET_NAMES = frozenset(
    {"code", "codes", "recovery_code", "recovery_codes", "authorization", "set_cookie"}
)
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
    "panic": logging.CRITICAL,
}
_STANDARD = set(vars(logging.makeLogRecord({})))


def is_secret_field(name: str) -> bool:
    lowered = name.lower().replace("-", "_")
    last = lowered.rsplit("_", 1)[-1]
    return lowered in _SECRET_NAMES or last in _SECRET_WORDS or last.rstrip("s") in _SECRET_WORDS


def _redacted(name: str, value: Any) -> Any:
    return "[redacted]" if is_secret_field(name) else value


class JsonFormatter(logging.Formatter):
    def __init__(self, env: str) -> None:
        super().__init__()
        self.env = env

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self.env:
            entry["env"] = self.env
        request_id = log_context.request_id.get()
        if request_id:
            entry["request_id"] = request_id
        trace_id = log_context.trace_id.get()
        if trace_id:
            entry["trace_id"] = trace_id
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = _redacted(name, value)
        if record.exc_info and record.exc_info[0] is not None:
            entry["error_type"] = record.exc_info[0].__name__
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(JsonFormatter):
    """``time level logger: message key=value ...``, the same facts as the JSON form
    (and the same redaction), for a person reading a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        entry = json.loads(super().format(record))
        head = f"{entry.pop('time')} {entry.pop('level'):<7} {entry.pop('logger')}: "
        message, trace = entry.pop("msg"), entry.pop("exc", None)
        facts = " ".join(f"{k}={json.dumps(v, default=str)}" for k, v in entry.items())
        line = head + message + (f" {facts}" if facts else "")
        return f"{line}\n{trace}" if trace else line


def configure(level: str, env: str, *, text: bool = False, access_log: bool = True) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter(env) if text else JsonFormatter(env))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS.get(level.lower(), logging.INFO))
    logging.getLogger("bastion.access").disabled = not access_log
    # hypercorn's own access log would duplicate ours and print raw paths with queries.
    logging.getLogger("hypercorn.access").disabled = True


def configure_for(settings: Settings) -> None:
    """Logging as the flags say (``--log-level``, ``--log-format``, ``--access-log``): the
    server and the ``--workers`` parent write the same kind of line."""
    configure(
        settings.log_level,
        settings.env,
        text=settings.log_format == "text",
        access_log=settings.access_log,
    )
