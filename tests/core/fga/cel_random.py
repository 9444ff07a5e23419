"""Random CEL expressions and what the evaluator gives for them, for test_cel_parse.py.

``cel_random.json`` was written by running this module with the Lark parser that came
before bastion's own (``PYTHONPATH=<checkout of 2555423>:. python -m
tests.core.fga.cel_random``): each expression with the
``repr`` of its value, ``"eval error"`` or ``"parse error"``. The new parser must give
the same outcome for every one. Expressions are written without parentheses where the
precedence table decides, with varied spacing and comments, over every literal form.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.core.fga.test_cel_eval import ACTIVATION

DATA = Path(__file__).with_name("cel_random.json")

_INTS = ["0", "7", "-3", "0x1F", "0xaB", "9223372036854775807", "-9223372036854775808", "42"]
_UINTS = ["0u", "3u", "0x10U", "18446744073709551615u", "5U"]
_DOUBLES = ["1.5", "-0.25", ".5", "2.0", "1e3", "1E-2", "6.02e+23", "-2.5e1", "0.0"]
_STRINGS = [
    "'a\\tb'",
    '"\\u00e9\\x41\\101"',
    "r'a\\tb'",
    'R"\\d+"',
    '"""two\nlines"""',
    "'''it's'''",
    "'\\U0001F600'",
    '"q\\"q"',
    "'\\a\\b\\f\\n\\r\\v\\\\\\?\\`'",
    "''",
    "'hello'",
    '"ell"',
    "'é'",
]
_BYTES = ["b'\\xff\\101'", 'B"ok"', "b'''x\ny'''", "br'\\x'", "b'é'", "b''"]
_NAMES = ["i", "u", "d", "s", "b", "xs", "m", "nothing", "big"]
_BINARY = [
    ["||"],
    ["&&"],
    ["<", "<=", ">", ">=", "==", "!=", "in"],
    ["+", "-"],
    ["*", "/", "%"],
]
_SPACES = ["", " ", "  ", "\n", " // note\n", "\t"]


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def space(self) -> str:
        return self.rng.choice(_SPACES) if self.rng.random() < 0.3 else " "

    def literal(self) -> str:
        pools = [_INTS, _INTS, _INTS, _UINTS, _DOUBLES, _STRINGS, _BYTES, ["true", "false", "null"]]
        pool = self.rng.choice(pools)
        return str(self.rng.choice(pool))

    def primary(self, depth: int) -> str:
        roll = self.rng.random()
        if depth <= 0 or roll < 0.3:
            return self.literal()
        if roll < 0.5:
            return self.rng.choice([*_NAMES, "i", "i", "i"])
        if roll < 0.6:
            return f"({self.expr(depth - 1)})"
        if roll < 0.7:
            items = [self.expr(depth - 1) for _ in range(self.rng.randrange(4))]
            return "[" + ", ".join(items) + "]"
        if roll < 0.77:
            keys = self.rng.sample(["'a'", "'b'", "1", "2u", "true", "'k'"], self.rng.randrange(3))
            entries = [f"{k}: {self.expr(depth - 1)}" for k in keys]
            return "{" + ", ".join(entries) + "}"
        if roll < 0.9:
            name = self.rng.choice(
                ["size", "int", "uint", "double", "string", "bool", "bytes", "dyn"]
            )
            return f"{name}({self.expr(depth - 1)})"
        variable = self.rng.choice(["x", "i"])
        macro = self.rng.choice(["all", "exists", "exists_one", "map", "filter"])
        body = self.expr(depth - 1).replace("xs", variable, 1)
        return f"xs.{macro}({variable}, {body})"

    def member(self, depth: int) -> str:
        text = self.primary(depth)
        if text[-1:].isdigit():  # ``1.size()``: cel-python's lexer reads ``1.`` as a double
            return text
        for _ in range(self.rng.choice([0, 0, 0, 1, 2]) if depth > 0 else 0):
            roll = self.rng.random()
            if roll < 0.3:
                text += f"[{self.expr(depth - 1)}]"
            elif roll < 0.5:
                text += "." + self.rng.choice(["k", "status", "a", "missing"])
            else:
                method = self.rng.choice(["size", "contains", "startsWith", "endsWith"])
                argument = "" if method == "size" else self.rng.choice([*_STRINGS, "s"])
                text += f".{method}({argument})"
        return text

    def unary(self, depth: int) -> str:
        prefix = "".join(
            self.rng.choice(["!", "-", "- "]) for _ in range(self.rng.choice([0] * 8 + [1, 2, 3]))
        )
        return prefix + self.member(depth)

    def binary(self, level: int, depth: int) -> str:
        if level == len(_BINARY):
            return self.unary(depth)
        parts = [self.binary(level + 1, depth)]
        for _ in range(self.rng.choice([0, 0, 0, 0, 0, 0, 1, 1, 2])):
            operator = self.rng.choice(_BINARY[level])
            # ``x in42``: Lark's contextual lexer splits it, the language definition does not
            left, right = (" ", " ") if operator == "in" else (self.space(), self.space())
            parts.append(f"{left}{operator}{right}{self.binary(level + 1, depth)}")
        return "".join(parts)

    def numeric(self, depth: int) -> str:
        """Integers under every operator, so that values (not errors) show the precedence."""
        if depth <= 0 or self.rng.random() < 0.25:
            atom = self.rng.choice(["i", "-i", "3", "-2", "--5", "0x10", "big", "xs[1]", "m.k"])
            return atom if self.rng.random() < 0.8 else f"({self.numeric(depth - 1)})"
        operator = self.rng.choice(["+", "-", "*", "/", "%", "<", "==", "!=", ">=", "?", "in"])
        left, right = self.numeric(depth - 1), self.numeric(depth - 1)
        if operator == "?":
            return f"{left} > 2 ? {right} : {self.numeric(depth - 1)}"
        if operator == "in":
            return f"{left} in [{right}, 7]"
        if operator in ("<", "==", "!=", ">="):
            joiner = self.rng.choice([" && ", " || ", " == ", " != "])
            flip = self.rng.choice(["", "!", "!!"])
            return f"{left} {operator} {right}{joiner}{flip}(i > {self.numeric(0)})"
        return f"{left}{self.space()}{operator}{self.space()}{right}"

    def expr(self, depth: int) -> str:
        level = self.rng.randrange(len(_BINARY) + 1)
        text = self.binary(level, depth)
        if depth > 0 and self.rng.random() < 0.1:
            text += f" ? {self.binary(0, depth - 1)} : {self.expr(depth - 1)}"
        return text


def outcome(expression: str) -> str:
    """The ``repr`` of the value, ``"eval error"`` or ``"parse error"``."""
    from bastion.core.fga.cel_eval import CelParseError, Program, parse
    from bastion.core.fga.cel_values import CelEvalError

    try:
        program = Program(parse(expression))
    except CelParseError:
        return "parse error"
    try:
        value: Any = program.evaluate(ACTIVATION)
    except CelEvalError:
        return "eval error"
    return repr(value)


def expressions(count: int = 3000, seed: int = 20261125) -> list[str]:
    generator = Generator(seed)
    mixed = [generator.expr(2) for _ in range(count)]
    return mixed + [generator.numeric(4) for _ in range(count // 2)]


if __name__ == "__main__":
    cases = [[expression, outcome(expression)] for expression in expressions()]
    DATA.write_text(json.dumps(cases, indent=0, ensure_ascii=False) + "\n")
    print({kind: sum(1 for _, o in cases if o == kind) for kind in ("parse error", "eval error")})
