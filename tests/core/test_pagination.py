"""The admin lists' pagination: defaults, the documented maximum, and refusals."""

from __future__ import annotations

import pytest

from bastion.core.errors import InvalidArgument
from bastion.core.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, parse_pagination


@pytest.mark.parametrize("value", [None, {}, {"page": None, "limit": None}])
def test_defaults(value: object) -> None:
    page = parse_pagination(value)
    assert page == Page(1, DEFAULT_LIMIT)
    assert page.describe(3) == {"page": 1, "limit": 10, "total": 3, "offset": 0}


def test_offset_and_description() -> None:
    page = parse_pagination({"page": 3, "limit": 7})
    assert page.offset == 14
    assert page.describe(100) == {"page": 3, "limit": 7, "total": 100, "offset": 14}


def test_grpc_style_decimal_strings_are_integers() -> None:
    assert parse_pagination({"page": "2", "limit": "5"}) == Page(2, 5)


def test_the_maximum_is_accepted() -> None:
    assert parse_pagination({"limit": MAX_LIMIT}).limit == MAX_LIMIT == 100


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"page": 0}, "pagination.page must be between 1 and 1000000000"),
        ({"page": -1}, "pagination.page must be between 1 and 1000000000"),
        ({"page": "-3"}, "pagination.page must be between 1 and 1000000000"),
        ({"page": 2**62}, "pagination.page must be between 1 and 1000000000"),
        ({"limit": 0}, "pagination.limit must be between 1 and 100"),
        ({"limit": -5}, "pagination.limit must be between 1 and 100"),
        ({"limit": MAX_LIMIT + 1}, "pagination.limit must be between 1 and 100"),
        ({"page": True}, "pagination.page must be an integer"),
        ({"page": 1.5}, "pagination.page must be an integer"),
        ({"limit": "ten"}, "pagination.limit must be an integer"),
        ([1, 2], "pagination must be an object"),
        ("page=1", "pagination must be an object"),
    ],
)
def test_invalid_values_are_refused_clearly(value: object, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_pagination(value)
    assert caught.value.message.startswith(message)
