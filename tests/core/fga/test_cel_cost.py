"""A condition evaluation's cost (cel-go's count), its limit and its stop; the request
context's size bound; the parameters the server fills (issue 36, items 8 and 9)."""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.fga.cel_cost import CHECK_EVERY, COST_EXCEEDED, Budget, EvaluationCancelled
from bastion.core.fga.cel_eval import Program, parse
from bastion.core.fga.cel_values import parse_duration, parse_timestamp
from bastion.core.fga.check import check
from bastion.core.fga.conditions import MAX_CONTEXT_VALUES, context_problem
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.server_context import fill_server_context, parse_server_context
from tests.core.fga.support import key, world

WINDOW = {
    "current_time": parse_timestamp("2023-10-11T10:30:00Z"),
    "grant_time": parse_timestamp("2023-10-11T10:00:00Z"),
    "grant_duration": parse_duration("1h"),
}


def spent(expression: str, activation: dict[str, Any]) -> int:
    budget = Budget()
    Program(parse(expression)).evaluate(activation, budget)
    return budget.spent


@pytest.mark.parametrize(
    ("expression", "activation", "cost"),
    [
        # three variables, two operators
        ("current_time < grant_time + grant_duration", WINDOW, 5),
        # two variables, `in` a list of three: the list's size
        ("x in allowed", {"x": "b", "allowed": ["a", "b", "c"]}, 5),
        # a variable, startsWith on 25 characters: a tenth, rounded up
        ("name.startsWith('ab')", {"name": "a" * 25}, 4),
        # two list literals (10 each), == on two lists of two
        ("[1, 2] == [1, 2]", {}, 21),
        # a field selection costs as a variable; a literal nothing
        ("m.f == 1", {"m": {"f": 1}}, 3),
        # the list, per element 3, the variable and `>`, and the result
        ("xs.all(x, x > 0)", {"xs": [1, 2, 3, 4]}, 1 + 4 * 5 + 1),
        # cel-go's own figures: a literal list's 10, 3 per element, 1 for the result
        ("[1, 2, 3].all(x, true)", {}, 20),
        ("xs.all(x, true)", {"xs": []}, 2),
        # exists stops at the first match: 4 per element tried
        ("xs.exists(x, x == 2)", {"xs": [1, 2, 3]}, 1 + 2 * 6 + 1),
        ("xs.exists_one(x, x == 2)", {"xs": [1, 2, 3]}, 1 + 3 * 3 + 1 + 2),
        ("xs.map(x, x)", {"xs": [1, 2]}, 1 + 2 * 13 + 1),
        ("xs.filter(x, x > 1)", {"xs": [1, 2]}, 1 + 2 * 3 + 12 + 1),
        # cel-go's: `in` a literal list of three (10 + 3), string equality (a tenth of 20)
        ("2 in [1, 2, 3]", {}, 13),
        ("'12345678901234567890' == '123456789012345678901234567890'", {}, 2),
        ("s.matches('[0-9]')", {"s": "a" * 500}, 103),
        ("s.contains(t)", {"s": "a" * 500, "t": "b" * 500}, 2502),
        ("s.startsWith(t)", {"s": "idc", "t": "b" * 500}, 3),
        ("bytes(s)", {"s": "a" * 500}, 51),
        ("string(b)", {"b": b"a" * 500}, 51),
        ("string(s)", {"s": "a" * 500}, 2),
        # `&&` and `||` cost nothing of their own, and skip what they do not evaluate
        ("a || b == 1", {"a": True, "b": 1}, 1),
        ("a && b == 1", {"a": True, "b": 1}, 3),
    ],
)
def test_costs_are_counted_as_cel_go_counts_them(
    expression: str, activation: dict[str, Any], cost: int
) -> None:
    assert spent(expression, activation) == cost


def test_the_limit_is_the_last_unit_allowed() -> None:
    program = Program(parse("current_time < grant_time + grant_duration"))
    assert program.evaluate(WINDOW, Budget(5)) is True
    with pytest.raises(EvaluationCancelled, match=COST_EXCEEDED):
        program.evaluate(WINDOW, Budget(4))


def test_running_out_is_not_an_error_value_that_or_absorbs() -> None:
    program = Program(parse("xs.all(x, x > 0) || true"))
    assert program.evaluate({"xs": [1] * 10}, Budget(100)) is True
    with pytest.raises(EvaluationCancelled, match=COST_EXCEEDED):
        program.evaluate({"xs": [1] * 100}, Budget(100))


def test_stop_is_asked_every_few_thousand_units() -> None:
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) == 3

    program = Program(parse("xs.all(x, x >= 0)"))
    small = [0] * (CHECK_EVERY // 10)
    assert program.evaluate({"xs": small}, Budget(0, stop)) is True
    assert asked == []
    with pytest.raises(EvaluationCancelled, match="the request's deadline passed"):
        program.evaluate({"xs": [0] * CHECK_EVERY}, Budget(0, stop))
    assert len(asked) == 3


def test_the_issues_condition_within_a_check() -> None:
    ts, store = world(
        "type user\ntype doc\n  relations\n    define viewer: [user with covers]\n"
        "condition covers(required: list<string>, granted: list<string>) {\n"
        "  required.all(r, granted.exists(g, g == r))\n}\n",
        key("doc:1#viewer@user:anne", "covers"),
    )
    items = [f"s{i}" for i in range(300)]
    context = {"required": items, "granted": items[::-1]}
    with pytest.raises(FgaError) as caught:
        check(ts, store, "doc:1", "viewer", "user:anne", RequestOptions(context=context))
    assert caught.value.fga_code is ErrorCode.VALIDATION_ERROR
    assert caught.value.message == f"condition 'covers' failed: {COST_EXCEEDED}"
    unbounded = RequestOptions(context=context, max_condition_cost=0)
    assert check(ts, store, "doc:1", "viewer", "user:anne", unbounded) is True
    few = {"required": items[:3], "granted": items[:3]}
    assert check(ts, store, "doc:1", "viewer", "user:anne", RequestOptions(context=few)) is True


def test_a_context_holds_at_most_a_thousand_values() -> None:
    assert context_problem({"xs": list(range(MAX_CONTEXT_VALUES - 1))}) is None
    assert context_problem({"m": {"a": [1, 2]}, "n": 3}) is None
    problem = context_problem({"xs": list(range(MAX_CONTEXT_VALUES)), "y": 1})
    assert problem == (
        "context holds 1002 values (list items and map entries counted), at most 1000; "
        "'xs' alone holds 1001"
    )
    nested = {"m": {"k": [[0] * 10] * 100}}
    assert context_problem(nested) == (
        "context holds 1102 values (list items and map entries counted), at most 1000; "
        "'m' alone holds 1102"
    )


def test_server_context_entries() -> None:
    assert parse_server_context(["current_time", " ip = client_ip "]) == {
        "current_time": "current_time",
        "ip": "client_ip",
    }
    for entries, problem in (
        (["clock"], "the source must be one of current_time, client_ip"),
        (["a-b=client_ip"], "'a-b' is not a condition parameter name"),
        (["ip=client_ip", "ip=current_time"], "'ip' is named twice"),
    ):
        with pytest.raises(ValueError, match=problem):
            parse_server_context(entries)


def test_the_servers_values_win() -> None:
    filled = {"current_time": "current_time", "ip": "client_ip"}
    sent = {"current_time": "2019-01-01T00:00:00Z", "ip": "10.1.2.3", "hour": 10}
    assert fill_server_context(sent, filled, now=1_700_000_000.5, client_ip="127.0.0.1") == {
        "current_time": "2023-11-14T22:13:20.500000Z",
        "ip": "127.0.0.1",
        "hour": 10,
    }
    assert fill_server_context(sent, {}, now=0, client_ip="") == sent
