"""Reading a request and writing an answer, the same way on every HTTP endpoint: JSON
bodies, query strings and forms (first value of a repeated name), the error envelope."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors, input_rules
from bastion.transports.http.errors import http_status

__all__ = [
    "RETRY_UNAVAILABLE_SECONDS",
    "error_response",
    "first_values",
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


async def form_values(request: Request) -> dict[str, str]:
    """A posted form's text fields (``application/x-www-form-urlencoded`` or multipart;
    uploaded files are not fields); any other body is no form: ``{}``."""
    form = await request.form()
    return {k: v for k, v in first_values(form).items() if isinstance(v, str)}


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object; an empty body is ``{}``, unknown fields stay."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise errors.InvalidArgument("request body must be a JSON object") from None
    except RecursionError:
        raise errors.InvalidArgument(
            f"request body is nested more than {input_rules.MAX_DEPTH} levels deep"
        ) from None
    if not isinstance(body, dict):
        raise errors.InvalidArgument("request body must be a JSON object")
    if (why := input_rules.refusal(body, "body")) is not None:
        raise errors.InvalidArgument(why)
    return body
