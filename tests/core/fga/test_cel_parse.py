"""bastion's CEL parser: every literal form, the precedence table, malformed input, bounded
nesting, and the same outcomes as the Lark parser it replaced on 4,500 random expressions."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from bastion.core.fga.cel_eval import Program
from bastion.core.fga.cel_parse import (
    MAX_DEPTH,
    MAX_NESTING,
    CelParseError,
    Node,
    Token,
    Tree,
    parse,
    tokenize,
)
from bastion.core.fga.cel_values import Uint
from bastion.core.fga.conditions import CompiledCondition
from bastion.core.fga.errors import ConditionError
from bastion.core.fga.model import Condition, ConditionParam
from tests.core.fga import cel_random

#: operator rules as the source writes them
_SYMBOLS = {
    "conditionalor": "||",
    "conditionaland": "&&",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
    "addition_add": "+",
    "addition_sub": "-",
    "multiplication_mul": "*",
    "multiplication_div": "/",
    "multiplication_mod": "%",
    "unary_not": "!",
    "unary_neg": "-",
}


def shape(node: Node) -> str:
    """The tree as an s-expression: ``(+ a b)``, ``(. a f)``, ``(call f x)``..."""
    if isinstance(node, Token):
        return node.value
    kids = node.children
    match node.data:
        case "conditionalor" | "conditionaland":
            return f"({_SYMBOLS[node.data]} {shape(kids[0])} {shape(kids[1])})"
        case "relation" | "addition" | "multiplication":
            operator = kids[0]
            assert isinstance(operator, Tree)
            left = shape(operator.children[0])
            return f"({_SYMBOLS[operator.data]} {left} {shape(kids[1])})"
        case "unary":
            operator = kids[0]
            assert isinstance(operator, Tree)
            return f"({_SYMBOLS[operator.data]} {shape(kids[1])})"
        case "expr":
            return f"(? {' '.join(shape(kid) for kid in kids)})"
        case "ident" | "literal":
            return shape(kids[0])
        case "dot_ident":
            return f".{shape(kids[0])}"
        case "member_dot":
            return f"(. {shape(kids[0])} {shape(kids[1])})"
        case "member_index":
            return f"([] {shape(kids[0])} {shape(kids[1])})"
        case "member_dot_arg":
            return f"(call {shape(kids[0])}.{shape(kids[1])}{_args(kids[2:])})"
        case "ident_arg" | "dot_ident_arg":
            dot = "." if node.data == "dot_ident_arg" else ""
            return f"(call {dot}{shape(kids[0])}{_args(kids[1:])})"
        case "list_lit":
            return f"[{_args(kids).strip()}]"
        case "map_lit" | "member_object":
            return f"{{{' '.join(shape(kid) for kid in kids)}}}"
        case _:
            return f"({node.data} {' '.join(shape(kid) for kid in kids)})"


def _args(rest: list[Node]) -> str:
    if not rest:
        return ""
    assert isinstance(rest[0], Tree)
    return "".join(f" {shape(kid)}" for kid in rest[0].children)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a || b && c", "(|| a (&& b c))"),
        ("a && b || c", "(|| (&& a b) c)"),
        ("a || b || c", "(|| (|| a b) c)"),
        ("a == b && c != d", "(&& (== a b) (!= c d))"),
        ("a < b == c", "(== (< a b) c)"),
        ("a in b == c in d", "(in (== (in a b) c) d)"),
        ("a + b * c", "(+ a (* b c))"),
        ("a * b + c", "(+ (* a b) c)"),
        ("a - b - c", "(- (- a b) c)"),
        ("a / b % c * d", "(* (% (/ a b) c) d)"),
        ("a + b < c * d", "(< (+ a b) (* c d))"),
        ("(a + b) * c", "(* (+ a b) c)"),
        ("-1 - -1", "(- -1 -1)"),
        ("1-1", "(- 1 1)"),
        ("1 -1", "(- 1 1)"),
        ("a-1", "(- a 1)"),
        ("x[0]-1", "(- ([] x 0) 1)"),
        ("(1)-1", "(- 1 1)"),
        ("- 1", "(- 1)"),
        ("--1", "(- -1)"),
        ("-a", "(- a)"),
        ("!!true", "(! (! true))"),
        ("!-!a", "(! (- (! a)))"),
        ("-a.b", "(- (. a b))"),
        ("!a || b", "(|| (! a) b)"),
        ("a.b[c].f(d)", "(call ([] (. a b) c).f d)"),
        ("a.f(x, y).g()", "(call (call a.f x y).g)"),
        ("f()", "(call f)"),
        (".f(1)", "(call .f 1)"),
        (".a.b", "(. .a b)"),
        ("a ? b : c ? d : e", "(? a b (? c d e))"),
        ("a || b ? c && d : e", "(? (|| a b) (&& c d) e)"),
        ("[1, 2,]", "[1 2]"),
        ("[]", "[]"),
        ("{'a': 1, 2: b,}", "{(mapinits 'a' 1 2 b)}"),
        ("{}", "{}"),
        ("M{f: 1, g: 2}", "{M (fieldinits f 1 g 2)}"),
        ("a // the rest is a comment\n + b", "(+ a b)"),
        ("x in [1, 2]", "(in x [1 2])"),
    ],
)
def test_precedence_and_shapes(expression: str, expected: str) -> None:
    assert shape(parse(expression)) == expected


def literal(expression: str) -> tuple[str, Any]:
    [token] = tokenize(expression)
    return token.type, token.literal


@pytest.mark.parametrize(
    ("expression", "kind", "value"),
    [
        ("0", "INT_LIT", 0),
        ("42", "INT_LIT", 42),
        ("-42", "INT_LIT", -42),
        ("0x1F", "INT_LIT", 31),
        ("0xaBc", "INT_LIT", 0xABC),
        ("-0x10", "INT_LIT", -16),
        ("9223372036854775807", "INT_LIT", 2**63 - 1),
        ("-9223372036854775808", "INT_LIT", -(2**63)),
        ("0u", "UINT_LIT", Uint(0)),
        ("3U", "UINT_LIT", Uint(3)),
        ("0x10u", "UINT_LIT", Uint(16)),
        ("18446744073709551615u", "UINT_LIT", Uint(2**64 - 1)),
        ("1.5", "FLOAT_LIT", 1.5),
        (".5", "FLOAT_LIT", 0.5),
        ("-.5", "FLOAT_LIT", -0.5),
        ("1e3", "FLOAT_LIT", 1000.0),
        ("1E-2", "FLOAT_LIT", 0.01),
        ("6.02e+23", "FLOAT_LIT", 6.02e23),
        ("-2.5e1", "FLOAT_LIT", -25.0),
        ("true", "BOOL_LIT", True),
        ("false", "BOOL_LIT", False),
        ("null", "NULL_LIT", None),
        ('"double"', "STRING_LIT", "double"),
        ("'single'", "STRING_LIT", "single"),
        ("''", "STRING_LIT", ""),
        ('"it\'s"', "STRING_LIT", "it's"),
        ("'say \"hi\"'", "STRING_LIT", 'say "hi"'),
        ('"""two\nlines"""', "STRING_LIT", "two\nlines"),
        ("'''it's \"x\"'''", "STRING_LIT", 'it\'s "x"'),
        ('"""a\\"""b"""', "STRING_LIT", 'a"""b'),
        ("'\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\`\\?'", "STRING_LIT", "\a\b\f\n\r\t\v\\'\"`?"),
        ("'\\x41\\101\\u00e9\\U0001F600'", "STRING_LIT", "AAé\U0001f600"),
        ("'\\377'", "STRING_LIT", "\xff"),
        ("'é'", "STRING_LIT", "é"),
        ("r'a\\tb'", "STRING_LIT", "a\\tb"),
        ('R"\\d+"', "STRING_LIT", "\\d+"),
        ('r"\\"', "STRING_LIT", "\\"),
        ("r'''x\\'''", "STRING_LIT", "x\\"),
        ("b'abc'", "BYTES_LIT", b"abc"),
        ('B"\\xff\\101"', "BYTES_LIT", b"\xffA"),
        ("b'\\u00e9'", "BYTES_LIT", "é".encode()),
        ("b'é'", "BYTES_LIT", "é".encode()),
        ("b'''x\ny'''", "BYTES_LIT", b"x\ny"),
        ("br'\\x'", "BYTES_LIT", b"\\x"),
        ("bR'\\n'", "BYTES_LIT", b"\\n"),
    ],
)
def test_literals(expression: str, kind: str, value: Any) -> None:
    found_kind, found = literal(expression)
    assert (found_kind, found, type(found)) == (kind, value, type(value))
    assert Program(parse(expression)).evaluate({}) == value


def test_identifiers_and_keywords() -> None:
    tokens = tokenize("_a1 in inx nullable b r")
    assert [(t.type, t.value) for t in tokens] == [
        ("IDENT", "_a1"),
        ("in", "in"),
        ("IDENT", "inx"),
        ("IDENT", "nullable"),
        ("IDENT", "b"),
        ("IDENT", "r"),
    ]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "empty expression"),
        ("   // only a comment", "empty expression"),
        ("'unterminated", "unterminated string at line 1, column 1"),
        ('x == "open', "unterminated string at line 1, column 6"),
        ("'''never closed", "unterminated string"),
        ("'line\nbreak'", "unterminated string"),
        ("b'unterminated", "unterminated string"),
        ("'\\q'", "invalid escape sequence at line 1, column 1"),
        ("'\\x4'", "invalid escape sequence"),
        ("'\\u12'", "invalid escape sequence"),
        ("'\\400'", "invalid escape sequence"),
        ("'\\uD800'", "invalid code point"),
        ("'\\U00110000'", "invalid code point"),
        ("'\\xff'", None),  # a lone \xff is U+00FF in a string: valid
        ("b'\\xff' == 'caf\\xe9'", None),
        ("9223372036854775808", "out of range"),
        ("-9223372036854775809", "out of range"),
        ("18446744073709551616u", "out of range"),
        ("-1u", "out of range"),
        ("1 2", "expected end of input, found '2' at line 1, column 3"),
        ("a b", "expected end of input"),
        ("(a))", "expected end of input"),
        ("a +", "expected an expression, found the end of input"),
        ("x <", "expected an expression"),
        ("a.b(", "expected an expression"),
        ("a.b(1", "expected ','"),
        ("f(1,)", "expected an expression"),
        ("[1,,]", "expected an expression"),
        ("{1: 2,,}", "expected an expression"),
        ("{1}", "expected ':'"),
        ("a ? b", "expected ':'"),
        ("a.1", "expected end of input, found '.1'"),
        ("a.", "expected 'IDENT'"),
        ("a = b", "unexpected '='"),
        ("a & b", "unexpected '&'"),
        ("a | b", "unexpected '|'"),
        ("a # b", "unexpected '#'"),
        ("0X1F", "expected end of input"),
        ("2.", "expected 'IDENT'"),
        ("1.e3", None),  # 1 .e3: a selection on an int, an evaluation error
        ("x in42", "expected end of input"),
        ("if", "reserved identifier 'if'"),
        ("a.while", "reserved identifier 'while'"),
        ("in", "expected an expression"),
        ("a.b[c](d)", "expected end of input"),  # only a name is called
    ],
)
def test_malformed_input(expression: str, message: str | None) -> None:
    if message is None:
        parse(expression)
        return
    with pytest.raises(CelParseError, match=re.escape(message)):
        parse(expression)
    # a condition that does not parse is refused as the other compile errors are
    condition = Condition("c", expression, {"x": ConditionParam("TYPE_NAME_INT", ())})
    with pytest.raises(ConditionError, match=re.escape(message)):
        CompiledCondition(condition)


def compile_condition(expression: str) -> CompiledCondition:
    return CompiledCondition(Condition("c", expression, {"x": ConditionParam("TYPE_NAME_INT")}))


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 10_000 + "x" + ")" * 10_000,
        "[" * 10_000 + "]" * 10_000,
        "f(" * 10_000 + ")" * 10_000,
        "x == 1 ? 1 : " * 10_000 + "1",
        "x" + " + x" * 10_000 + " > 1",
        "!" * 10_000 + "(x > 1)",
        "-" * 10_000 + "x > 1",
        "x" + ".a" * 10_000,
        "x" + "[0]" * 10_000,
        "x > 1" + " || x > 1" * 10_000,
    ],
)
def test_nesting_is_bounded_and_refused_as_a_condition_error(expression: str) -> None:
    with pytest.raises(ConditionError, match="nested more than"):
        compile_condition(expression)


def test_the_deepest_expressions_allowed_compile_and_evaluate() -> None:
    # a sum as deep as allowed: each ``+`` is two levels (the operation, its operator)
    terms = (MAX_DEPTH - 4) // 2
    summed = compile_condition("x" + " + x" * terms + f" == {terms + 1}")
    assert summed.evaluate({"x": 1}, None, max_cost=0) is True
    # ... though past OpenFGA's default cost (one unit a variable, one an addition)
    with pytest.raises(ConditionError, match="actual cost limit exceeded"):
        summed.evaluate({"x": 1}, None)
    with pytest.raises(ConditionError, match="nested more than"):
        compile_condition("x" + " + x" * (terms + 2) + " > 1")
    nested = compile_condition("(" * (MAX_NESTING - 1) + "x == 1" + ")" * (MAX_NESTING - 1))
    assert nested.evaluate({"x": 1}, None) is True


def test_same_outcomes_as_the_lark_parser_on_random_expressions() -> None:
    """``cel_random.json`` holds what cel-python's grammar on Lark gave."""
    cases = json.loads(cel_random.DATA.read_text())
    assert len(cases) == 4500
    differences = []
    for expression, before in cases:
        if cel_random.outcome(expression) != before:
            differences.append((expression, before))
    assert not differences, differences[:3]
    kinds = {kind for _, kind in cases}
    assert {"parse error", "eval error", "True", "False"} <= kinds
    assert sum(kind not in ("parse error", "eval error") for _, kind in cases) > 1000
