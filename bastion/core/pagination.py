"""Offset pagination of the admin lists: ``{page, limit}`` in, ``{page, limit, total, offset}`` out.

Rules (the same on every surface):

- ``pagination`` may be absent or ``null``: page 1, limit :data:`DEFAULT_LIMIT`.
- ``page`` and ``limit`` may each be absent or ``null`` (their default); otherwise they must
  be integers (a decimal string is accepted, as gRPC's JSON mapping writes int64 that way):
  1 <= ``page`` <= :data:`MAX_PAGE` and 1 <= ``limit`` <= :data:`MAX_LIMIT`. Anything else
  is refused with ``invalid_argument`` rather than guessed at. (The page bound keeps every
  offset inside a 64-bit integer, which SQL, GraphQL's Int64 and protobuf all require.)
- A page past the end is not an error: it is empty, and ``total`` says how many there are.

Over gRPC a proto3 ``0`` cannot be told from an absent field, so there ``page: 0`` and
``limit: 0`` mean "the default".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bastion.core.errors import InvalidArgument

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_PAGE", "Page", "parse_pagination"]

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_PAGE = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Page:
    page: int = 1
    limit: int = DEFAULT_LIMIT

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit

    def describe(self, total: int) -> dict[str, int]:
        """The ``pagination`` object of a list response."""
        return {"page": self.page, "limit": self.limit, "total": total, "offset": self.offset}


def _integer(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidArgument(f"pagination.{name} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise InvalidArgument(f"pagination.{name} must be an integer")


def parse_pagination(value: Any) -> Page:
    """The ``pagination`` field of a list request, checked (see the module's rules)."""
    if value is None:
        return Page()
    if not isinstance(value, dict):
        raise InvalidArgument("pagination must be an object with page and limit")
    page = _integer(value.get("page"), "page")
    limit = _integer(value.get("limit"), "limit")
    if page is not None and not 1 <= page <= MAX_PAGE:
        raise InvalidArgument(f"pagination.page must be between 1 and {MAX_PAGE}")
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"pagination.limit must be between 1 and {MAX_LIMIT}")
    return Page(page=page or 1, limit=limit or DEFAULT_LIMIT)
