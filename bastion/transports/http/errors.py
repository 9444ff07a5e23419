"""The HTTP surface's one table from error class to status."""

from __future__ import annotations

from bastion.core import errors

HTTP_STATUS: dict[type[errors.BastionError], int] = {
    errors.InvalidArgument: 400,
    errors.Unauthenticated: 401,
    errors.PermissionDenied: 403,
    errors.NotFound: 404,
    errors.MethodNotAllowed: 405,
    errors.AlreadyExists: 409,
    errors.FailedPrecondition: 400,
    errors.PayloadTooLarge: 413,
    errors.ResourceExhausted: 429,
    errors.Unimplemented: 501,
    errors.Internal: 500,
    errors.Unavailable: 503,
    errors.DeadlineExceeded: 504,
}


def http_status(error: errors.BastionError) -> int:
    for cls in type(error).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500
