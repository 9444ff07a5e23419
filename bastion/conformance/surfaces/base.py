"""The abstract client every scenario is written against."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeVar

from bastion.conformance.operations import Operation
from bastion.conformance.outcome import Credentials, Outcome

T = TypeVar("T")

#: The status the spec (and bastion's one error table) gives each error code on HTTP.
HTTP_STATUS = {
    "invalid_argument": 400,
    "failed_precondition": 400,
    "unauthenticated": 401,
    "permission_denied": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "already_exists": 409,
    "payload_too_large": 413,
    "resource_exhausted": 429,
    "internal": 500,
    "unimplemented": 501,
    "unavailable": 503,
    "deadline_exceeded": 504,
}


class Unexpressible(Exception):
    """The request cannot be put on this surface (a field its schema or proto lacks)."""


class Surface(Protocol):
    name: str

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome: ...

    def close(self) -> None: ...


def round_robin(targets: Sequence[T]) -> Iterator[T]:
    """Calls alternate between deployments sharing one store (several server processes)."""
    if not targets:
        raise ValueError("at least one target is needed")
    return itertools.cycle(targets)
