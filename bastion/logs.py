"""Structured JSON logs on stderr.

Log lines carry event names and bounded facts. Passwords, tokens, codes, secrets and
cookie values are never passed to a logger in the first place; as a second line of
defence, any field whose name says it holds one is replaced before it is written.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_SECRET_WORDS = ("password", "secret", "token", "otp", "cookie", "authorization", "code", "key")
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


def _redacted(name: str, value: Any) -> Any:
    lowered = name.lower()
    return "[redacted]" if any(w in lowered for w in _SECRET_WORDS) else value


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
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                entry[name] = _redacted(name, value)
        if record.exc_info:
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
