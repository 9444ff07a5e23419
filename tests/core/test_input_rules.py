"""What no request may carry (core.input_rules): the refusals and the field they name."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from bastion.core.input_rules import MAX_DEPTH, refusal


def nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": "ok", "b": ["é", 1, None, {"c": True}]}, None),
        ({"token": "a\x00b"}, "body.token contains a NUL character"),
        ({"a": [{"b": "\udfff"}]}, "body.a[0].b is not valid text (an unpaired surrogate)"),
        ({"a": {"k\x00": 1}}, "body.a (a key) contains a NUL character"),
        ({"\ud800": 1}, "body (a key) is not valid text (an unpaired surrogate)"),
        ("\x00", "body contains a NUL character"),
        (OrderedDict(x=("ok", "\x00")), "body.x[1] contains a NUL character"),
        (nested(MAX_DEPTH), None),
        (nested(MAX_DEPTH + 1), "body" + "[0]" * MAX_DEPTH + " is nested more than 64 levels deep"),
        ({"from": 2**63 - 1, "to": -(2**63), "f": 1e300}, None),
        ({"from_timestamp": 2**63}, "body.from_timestamp is out of range (integers are 64-bit)"),
        ({"page": [-(2**63) - 1]}, "body.page[0] is out of range (integers are 64-bit)"),
    ],
    ids=[
        "clean",
        "nul",
        "surrogate",
        "nul-key",
        "surrogate-key",
        "bare",
        "mapping",
        "deep-ok",
        "deep",
        "int64-ok",
        "past-int64",
        "below-int64",
    ],
)
def test_refusal_names_the_field(value: object, expected: str | None) -> None:
    assert refusal(value, "body") == expected


def test_the_first_bad_field_is_named() -> None:
    assert refusal({"a": "ok", "b": "\x00", "c": "\x00"}, "params") == (
        "params.b contains a NUL character"
    )
