"""One error hierarchy for every surface.

Every failure the service reports is a leaf of :class:`BastionError`. A leaf carries its
gRPC-style status token as ``code`` (snake_case, as REST and GraphQL ``extensions.code``
show it); each transport keeps ONE table from that token to its own status (HTTP status,
gRPC status code). ``ClientError`` means the caller sent something wrong; ``ServerError``
means we failed. The roots are abstract: constructing them directly is a programming
error, so every raise site has to say which kind of failure it is.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AlreadyExists",
    "BastionError",
    "ClientError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PermissionDenied",
    "ResourceExhausted",
    "ServerError",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
]


class BastionError(Exception):
    """Root of every error the service reports to a caller."""

    code: ClassVar[str]
    _abstract: ClassVar[bool] = True

    def __init_subclass__(cls, *, abstract: bool = False, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._abstract = abstract

    def __init__(self, message: str) -> None:
        if type(self)._abstract:
            raise TypeError(f"{type(self).__name__} is abstract; raise one of its leaves")
        super().__init__(message)
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class ClientError(BastionError, abstract=True):
    """The caller sent something the service refuses."""


class ServerError(BastionError, abstract=True):
    """The service could not do what was asked through no fault of the caller."""


class InvalidArgument(ClientError):
    code = "invalid_argument"


class Unauthenticated(ClientError):
    code = "unauthenticated"


class PermissionDenied(ClientError):
    code = "permission_denied"


class NotFound(ClientError):
    code = "not_found"


class AlreadyExists(ClientError):
    code = "already_exists"


class FailedPrecondition(ClientError):
    code = "failed_precondition"


class MethodNotAllowed(ClientError):
    """Only HTTP can express this; the HTTP edge raises it for a known path."""

    code = "method_not_allowed"


class PayloadTooLarge(ClientError):
    """A request body over the configured limit: gRPC's own word for an oversized
    message is RESOURCE_EXHAUSTED; HTTP answers 413."""

    code = "resource_exhausted"


class ResourceExhausted(ClientError):
    """A rate limit or throttle; ``retry_after`` is in whole seconds.

    ``before_effect``: the throttle answered before the operation did anything, so the
    identical request may be sent again after ``retry_after`` (the transports say so on
    the wire with :data:`BEFORE_EFFECT_MARK`; clients such as the conformance suite pace
    themselves by it).
    """

    code = "resource_exhausted"

    def __init__(self, message: str, *, retry_after: int = 1, before_effect: bool = False) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)
        self.before_effect = before_effect


#: Header (HTTP) and trailing-metadata key (gRPC) naming a throttle that answered before
#: any effect; its only value is :data:`BEFORE_EFFECT_VALUE`.
BEFORE_EFFECT_MARK = "bastion-throttled"
BEFORE_EFFECT_VALUE = "before-effect"


class Unimplemented(ClientError):
    code = "unimplemented"


class Internal(ServerError):
    code = "internal"


class Unavailable(ServerError):
    code = "unavailable"


class DeadlineExceeded(ServerError):
    code = "deadline_exceeded"
