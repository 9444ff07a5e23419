"""OpenFGA's numeric error codes as one exception type.

OpenFGA answers a bad request with a numeric code from ``errors_ignore.proto`` (2000
validation_error, 2002 resolution too complex, 2021 type not found, ...). The engine raises
:class:`FgaError` carrying that code; the API layer shows it as an ``invalid_argument``.
"""

from __future__ import annotations

from enum import IntEnum

from bastion.core.errors import InvalidArgument

__all__ = ["ConditionError", "ErrorCode", "FgaError"]


class ErrorCode(IntEnum):
    """The subset of OpenFGA's error codes the engine produces."""

    VALIDATION_ERROR = 2000
    AUTHORIZATION_MODEL_NOT_FOUND = 2001
    RESOLUTION_TOO_COMPLEX = 2002
    INVALID_EXPAND_INPUT = 2010
    TYPE_NOT_FOUND = 2021
    RELATION_NOT_FOUND = 2022
    INVALID_TUPLE = 2027
    INVALID_AUTHORIZATION_MODEL = 2056
    UNSUPPORTED_SCHEMA_VERSION = 2057


class FgaError(InvalidArgument):
    """A request the engine refuses, with OpenFGA's numeric code."""

    def __init__(self, fga_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.fga_code = fga_code

    def __repr__(self) -> str:
        return f"FgaError({int(self.fga_code)}, {self.message!r})"


class ConditionError(ValueError):
    """A condition that cannot be evaluated: missing or ill-typed parameter, CEL error."""
