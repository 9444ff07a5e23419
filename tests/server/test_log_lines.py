"""The JSON log line: secrets are redacted by field name, never by a substring of it
(``error_code`` is kept, a one-time ``code`` is not); a line written while a request is
served carries its request id (and its trace id when traced); a line with an exception
names the exception's type."""

from __future__ import annotations

import io
import json
import logging

from bastion.core import log_context
from bastion.logs import JsonFormatter, is_secret_field


def written(record_extra: dict[str, object], *, exc: BaseException | None = None) -> dict:  # type: ignore[type-arg]
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter(env=""))
    logger = logging.getLogger("bastion.test-log-lines")
    logger.handlers[:] = [handler]
    logger.propagate = False
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    logger.error("request failed", extra=record_extra, exc_info=exc_info)
    return json.loads(out.getvalue())


def test_kinds_of_error_are_kept_and_secret_values_are_not() -> None:
    line = written(
        {
            "error_code": "unavailable",
            "path": "/v1/login",
            "code": "123456",
            "new_password": "hunter2",
            "access_token": "eyJ...",
            "client_secret": "s",
            "api_key": "k",
        }
    )
    assert line["error_code"] == "unavailable"
    assert line["path"] == "/v1/login"
    for name in ("code", "new_password", "access_token", "client_secret", "api_key"):
        assert line[name] == "[redacted]", name


def test_names_are_whole_words() -> None:
    kept = ["error_code", "status_code", "secret_length", "monkey", "tokenizer", "passwords_hashed"]
    assert [name for name in kept if is_secret_field(name)] == []
    hidden = ["password", "otp", "recovery_codes", "refresh-token", "Authorization", "tokens"]
    assert [name for name in hidden if not is_secret_field(name)] == []


def test_a_line_inside_a_request_carries_its_id_and_the_exception_type() -> None:
    assert "request_id" not in written({})
    token = log_context.request_id.set("req-42")
    try:
        try:
            raise TimeoutError("slow")
        except TimeoutError as exc:
            line = written({}, exc=exc)
    finally:
        log_context.request_id.reset(token)
    assert line["request_id"] == "req-42"
    assert line["error_type"] == "TimeoutError"
    assert "slow" in line["exc"]


def test_a_line_inside_a_traced_request_carries_its_trace_id() -> None:
    assert "trace_id" not in written({})
    token = log_context.trace_id.set("4bf92f3577b34da6a3ce929d0e0e4736")
    try:
        line = written({})
    finally:
        log_context.trace_id.reset(token)
    assert line["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
