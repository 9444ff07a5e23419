"""How a GraphQL error is shown to the client: ``message``, ``locations``, ``path`` and
``extensions.code``.

This is the GraphQL side of the one error table every transport keeps: a
:class:`core.errors.BastionError` leaf shows its own message and its ``code`` (the same
snake_case token REST puts in its envelope). Errors about the request as a whole
(syntax, validation, variable coercion, limits; they have no ``path``) keep their
message and the code they carry, ``invalid_argument`` by default. Anything else that
fails inside a field is a bug on our side (a resolver raising something else, returning
null for a non-null field or a value of the wrong shape): the client sees "internal
server error" with code ``internal`` and nothing of the exception; the log gets it.
"""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError

from bastion.core.errors import BastionError, Internal, InvalidArgument

__all__ = ["INTERNAL_CODE", "INTERNAL_MESSAGE", "format_error"]

INTERNAL_MESSAGE = "internal server error"
INTERNAL_CODE = Internal.code
REQUEST_ERROR_CODE = InvalidArgument.code

_log = logging.getLogger("bastion.graphql")


def _bastion_error(exc: BaseException | None) -> BastionError | None:
    """The BastionError behind ``exc``, seeing through a group that holds just one.

    A service operation that runs work in a trio nursery may hand its error back
    wrapped in a one-member exception group.
    """
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, BastionError) else None


def _code_of(error: GraphQLError) -> str:
    for candidate in (error, error.original_error):
        if isinstance(candidate, GraphQLError) and candidate.extensions:
            code = candidate.extensions.get("code")
            if isinstance(code, str):
                return code
    return REQUEST_ERROR_CODE


def _message_and_code(error: GraphQLError) -> tuple[str, str]:
    cause = error.original_error
    bastion = _bastion_error(cause)
    if bastion is not None:
        return bastion.message, bastion.code
    # Outside any field: syntax, validation, variable coercion, limits. The request
    # is at fault, and the message names only things the client sent.
    if error.path is None:
        return error.message, _code_of(error)
    # Inside a field, anything but a BastionError is our bug, including graphql-core's
    # own complaints about what a resolver returned (they may quote its repr).
    failure = cause if cause is not None else error
    _log.error(
        "unexpected error resolving %s",
        ".".join(str(key) for key in error.path),
        exc_info=(type(failure), failure, failure.__traceback__),
    )
    return INTERNAL_MESSAGE, INTERNAL_CODE


def format_error(error: GraphQLError) -> dict[str, Any]:
    """The error as it goes into the response's ``errors`` list."""
    message, code = _message_and_code(error)
    formatted: dict[str, Any] = {"message": message}
    if error.locations:
        formatted["locations"] = [
            {"line": location.line, "column": location.column} for location in error.locations
        ]
    if error.path is not None:
        formatted["path"] = list(error.path)
    formatted["extensions"] = {"code": code}
    return formatted
