"""Reading a request and writing an answer, the same way on every HTTP endpoint: JSON
bodies, query strings and forms (first value of a repeated name), the error envelope."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors, input_rules
from bastion.transports.http.errors import http_status

__all__ = [
    "RETRY_UNAVAILABLE_SECONDS",
    "decode_json",
    "error_response",
    "first_values",
    "form_or_json",
    "form_values",
    "json_response",
    "query_values",
    "read_json_object",
]

#: ``Retry-After`` of a 503: storage down, or a request past its deadline.
RETRY_UNAVAILABLE_SECONDS = 1
_JSON = "application/json"


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        headers=headers,
        media_type=_JSON,
    )


def error_response(error: errors.BastionError) -> Response:
    headers = {}
    if isinstance(error, errors.ResourceExhausted):
        headers["Retry-After"] = str(error.retry_after)
        if error.before_effect:
            headers[errors.BEFORE_EFFECT_MARK] = errors.BEFORE_EFFECT_VALUE
    elif isinstance(error, errors.Unavailable):
        headers["Retry-After"] = str(RETRY_UNAVAILABLE_SECONDS)
    return json_response(
        {"code": error.code, "message": error.message}, http_status(error), headers
    )


def first_values(pairs: ImmutableMultiDict[str, Any]) -> dict[str, Any]:
    """Each name once, with the value it first had (a repeated name keeps its first)."""
    values: dict[str, Any] = {}
    for name, value in pairs.multi_items():
        values.setdefault(name, value)
    return values


def query_values(request: Request) -> dict[str, str]:
    return first_values(request.query_params)


def _refuse(value: Any, where: str) -> None:
    if (why := input_rules.refusal(value, where)) is not None:
        raise errors.InvalidArgument(why)


async def form_values(request: Request) -> dict[str, str]:
    """A posted form's text fields (``application/x-www-form-urlencoded`` or multipart;
    uploaded files are not fields); any other body is no form: ``{}``. The input rules
    hold for every field, as for JSON bodies."""
    form = await request.form()
    values = {k: v for k, v in first_values(form).items() if isinstance(v, str)}
    _refuse(values, "form")
    return values


def decode_json(raw: bytes, where: str = "body") -> Any:
    """JSON text as a value under the input rules (nesting, NUL, surrogates), refused with
    ``InvalidArgument`` naming the field; ``ValueError`` when it is not JSON at all. Every
    JSON body of every route is read through here."""
    try:
        value = json.loads(raw)
    except RecursionError:  # json gives up near Python's recursion limit: far past ours
        raise errors.InvalidArgument(
            f"{where} is nested more than {input_rules.MAX_DEPTH} levels deep"
        ) from None
    _refuse(value, where)
    return value


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object; an empty body is ``{}``, unknown fields stay."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = decode_json(raw)
    except ValueError:  # UnicodeDecodeError included
        raise errors.InvalidArgument("request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise errors.InvalidArgument("request body must be a JSON object")
    return body


async def form_or_json(request: Request) -> dict[str, Any]:
    """``application/x-www-form-urlencoded`` (RFC 6749) or a JSON object (what is neither
    reads as ``{}``), under the input rules."""
    raw = await request.body()
    if "json" in request.headers.get("content-type", "").lower():
        try:
            body = decode_json(raw or b"{}")
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}
    values = dict(parse_qsl(raw.decode("utf-8", "replace")))
    _refuse(values, "form")
    return values
