"""CEL conditions: OpenFGA's parameter coercions, ipaddress, missing parameters."""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.fga.conditions import (
    MAX_STORED_CONTEXT_BYTES,
    CompiledCondition,
    ConditionError,
    IPAddress,
    stored_context_problem,
)
from bastion.core.fga.model import Condition, ConditionParam


def condition(expression: str, **params: str) -> CompiledCondition:
    parsed = {}
    for name, type_name in params.items():
        base, _, generic = type_name.partition("<")
        parsed[name] = ConditionParam(
            f"TYPE_NAME_{base.upper()}", (f"TYPE_NAME_{generic[:-1].upper()}",) if generic else ()
        )
    return CompiledCondition(Condition("c", expression, parsed))


@pytest.mark.parametrize(
    ("expression", "params", "context", "expected"),
    [
        ("x < 10", {"x": "int"}, {"x": 3}, True),
        ("x < 10", {"x": "int"}, {"x": "3"}, True),
        ("x < 10", {"x": "int"}, {"x": 3.0}, True),
        ("x > 1u", {"x": "uint"}, {"x": 2}, True),
        ("x > 1.5", {"x": "double"}, {"x": "2.5"}, True),
        ("s.startsWith('ab')", {"s": "string"}, {"s": "abc"}, True),
        (
            "t < timestamp('2023-10-11T10:00:00Z')",
            {"t": "timestamp"},
            {"t": "2023-10-11T09:00:00.000Z"},
            True,
        ),
        ("d > duration('1h')", {"d": "duration"}, {"d": "1h30m"}, True),
        ("ip.in_cidr('192.168.0.0/24')", {"ip": "ipaddress"}, {"ip": "192.168.0.7"}, True),
        ("ip.in_cidr('192.168.0.0/24')", {"ip": "ipaddress"}, {"ip": "10.0.0.1"}, False),
        ("ip != ipaddress('10.0.0.1')", {"ip": "ipaddress"}, {"ip": "10.0.0.1"}, False),
        ("'a' in l", {"l": "list<string>"}, {"l": ["a", "b"]}, True),
        ("m['k'] == 2", {"m": "map<int>"}, {"m": {"k": "2"}}, True),
    ],
)
def test_typed_parameters(
    expression: str, params: dict[str, str], context: dict[str, Any], expected: bool
) -> None:
    assert condition(expression, **params).evaluate(context, None) is expected


@pytest.mark.parametrize(
    ("params", "context"),
    [
        ({"x": "int"}, {"x": 1.5}),
        ({"x": "int"}, {"x": "ten"}),
        ({"x": "int"}, {"x": True}),
        ({"x": "uint"}, {"x": -1}),
        ({"x": "double"}, {"x": float("inf")}),
        ({"x": "double"}, {"x": "1.797693134862315708145274237317043567981e+309"}),
        ({"x": "timestamp"}, {"x": "2023-10-11T11:00.000Z"}),
        ({"x": "duration"}, {"x": "soon"}),
        ({"x": "ipaddress"}, {"x": "300.1.1.1"}),
        ({"x": "string"}, {"x": 5}),
        ({"x": "list<int>"}, {"x": "1"}),
        ({"x": "int"}, {}),
    ],
)
def test_bad_or_missing_parameters_fail(params: dict[str, str], context: dict[str, Any]) -> None:
    with pytest.raises(ConditionError):
        condition("true", **params).evaluate(context, None)


def test_every_declared_parameter_is_required_even_if_unused() -> None:
    with pytest.raises(ConditionError, match="missing"):
        condition("x < 1 || true", x="int", y="string").evaluate({"x": 0}, None)


def test_tuple_context_overrides_request_context() -> None:
    compiled = condition("x == 'tuple'", x="string")
    assert compiled.evaluate({"x": "request"}, {"x": "tuple"}) is True


def test_non_bool_result_and_runtime_errors_fail() -> None:
    with pytest.raises(ConditionError):
        condition("x + 1", x="int").evaluate({"x": 1}, None)
    with pytest.raises(ConditionError):
        condition("m['missing'] == 1", m="map<int>").evaluate({"m": {}}, None)


def test_ipaddress_equality_and_hash() -> None:
    assert IPAddress("10.0.0.1") == IPAddress("10.0.0.1")
    assert len({IPAddress("10.0.0.1"), IPAddress("10.0.0.1")}) == 1
    with pytest.raises(ConditionError):
        IPAddress("10.0.0.1").in_cidr("not-a-cidr")


def test_a_stored_context_is_at_most_32_kib_of_json() -> None:
    # {"x":"..."} is 8 bytes around the value.
    assert stored_context_problem({"x": "a" * (MAX_STORED_CONTEXT_BYTES - 8)}) is None
    problem = stored_context_problem({"x": "a" * (MAX_STORED_CONTEXT_BYTES - 7)})
    assert problem == "condition context is 32769 bytes of JSON, at most 32768 (32 KiB)"
    # Counted in bytes, not characters.
    assert stored_context_problem({"x": "é" * 20_000}) is not None
