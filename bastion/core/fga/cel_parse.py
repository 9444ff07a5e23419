"""CEL's syntax, read by hand from the language definition (cel-spec ``doc/langdef.md``).

A regular-expression tokenizer and a precedence-climbing parser give a tree of
:class:`Tree` nodes (a rule name in ``data``, operands in ``children``) over
:class:`Token` leaves, which :mod:`.cel_types` checks and :mod:`.cel_eval` compiles.
Literals are decoded here, so a bad escape or an out-of-range number is a parse error.

Where the language definition leaves room, cel-go decides: raw strings have no escapes,
``-`` written against a number is part of the literal (``-9223372036854775808`` is an
``int``), a trailing comma closes a list or map literal, reserved words are not
identifiers. Nesting is bounded (:data:`MAX_DEPTH`, :data:`MAX_NESTING`), so no input
reaches Python's recursion limit here or in the walkers.
"""

from __future__ import annotations

import re
from typing import Any

from bastion.core.fga.cel_values import Uint

__all__ = [
    "MAX_DEPTH",
    "MAX_NESTING",
    "CelParseError",
    "Node",
    "Token",
    "Tree",
    "parse",
    "tokenize",
]

#: how deep a tree may be (``a + b + c`` is four deep): the walkers recurse once a level
MAX_DEPTH = 250
#: how deeply brackets and ternaries may nest: the parser recurses about seven times a level
MAX_NESTING = 64


class CelParseError(ValueError):
    """An expression that is not CEL."""


class Token:
    """A leaf: its ``type`` (``IDENT``, ``INT_LIT``, ``STRING_LIT``, ...), its source
    text in ``value`` (``str(token)``) and, for a literal, its decoded ``literal``."""

    __slots__ = ("literal", "pos", "type", "value")

    def __init__(self, type_: str, value: str, pos: int, literal: Any = None) -> None:
        self.type = type_
        self.value = value
        self.pos = pos
        self.literal = literal

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r})"


class Tree:
    """A rule applied: ``data`` names it, ``children`` are its operands."""

    __slots__ = ("children", "data")

    def __init__(self, data: str, children: list[Node]) -> None:
        self.data = data
        self.children = children

    def __repr__(self) -> str:
        return f"Tree({self.data!r}, {self.children!r})"


Node = Tree | Token

# -- tokens -----------------------------------------------------------------------------------

_LEXEME = re.compile(
    r"""
    (?P<space>(?:[\t\n\f\r ]+|//[^\n]*)+)
  | (?P<FLOAT_LIT>(?:[0-9]+\.[0-9]+|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<INT_LIT>(?:0x[0-9a-fA-F]+|[0-9]+)(?P<unsigned>[uU])?)
  | (?P<raw>[bB]?[rR](?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"[^"\n\r]*"|'[^'\n\r]*'))
  | (?P<quoted>[bB]?(?:\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\"|'''(?:\\[\s\S]|[^\\])*?'''
                       |"(?:\\.|[^"\\\n\r])*"|'(?:\\.|[^'\\\n\r])*'))
  | (?P<IDENT>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"true": "BOOL_LIT", "false": "BOOL_LIT", "null": "NULL_LIT", "in": "in"}
_RESERVED = frozenset(
    {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let"}
    | {"loop", "package", "namespace", "return", "var", "void", "while"}
)
#: tokens an operand ends with: after one, ``-`` is subtraction, not a sign
_OPERAND_END = frozenset(
    {"IDENT", "INT_LIT", "UINT_LIT", "FLOAT_LIT", "STRING_LIT", "BYTES_LIT", "BOOL_LIT"}
    | {"NULL_LIT", ")", "]", "}"}
)
_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\\"'`?])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2}))"
)
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", '"': '"', "'": "'", "`": "`", "?": "?",
}  # fmt: skip
_INT_RANGE = (-(2**63), 2**63 - 1)
_UINT_MAX = 2**64 - 1


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - text.rfind(chr(10), 0, pos)}"


def tokenize(text: str) -> list[Token]:
    """``text`` as tokens, literals decoded, or :class:`CelParseError`."""
    tokens: list[Token] = []
    pos, end = 0, len(text)
    while pos < end:
        match = _LEXEME.match(text, pos)
        if match is None:
            what = "unterminated string" if text[pos] in "\"'" else f"unexpected {text[pos]!r}"
            raise CelParseError(f"{what} at {_where(text, pos)}")
        kind, lexeme = match.lastgroup, match.group()
        if kind == "INT_LIT" and match.group("unsigned"):
            kind = "UINT_LIT"
        if kind == "space":
            pos = match.end()
            continue
        try:
            token = _token(kind, lexeme, pos, tokens)
        except CelParseError as exc:
            raise CelParseError(f"{exc} at {_where(text, pos)}") from None
        if token.pos != pos:  # a sign folded into the number
            tokens.pop()
        tokens.append(token)
        pos = match.end()
    return tokens


def _token(kind: str | None, lexeme: str, pos: int, before: list[Token]) -> Token:
    if kind == "IDENT":
        if lexeme in _RESERVED:
            raise CelParseError(f"reserved identifier {lexeme!r}")
        keyword = _KEYWORDS.get(lexeme)
        if keyword is None:
            return Token("IDENT", lexeme, pos)
        return Token(keyword, lexeme, pos, None if lexeme == "null" else lexeme == "true")
    if kind == "punct":
        return Token(lexeme, lexeme, pos)
    if kind in ("INT_LIT", "UINT_LIT", "FLOAT_LIT"):
        sign = before[-1] if before else None
        if (
            sign is not None
            and sign.type == "-"
            and sign.pos == pos - 1
            and (len(before) < 2 or before[-2].type not in _OPERAND_END)
        ):
            pos, lexeme = pos - 1, "-" + lexeme
        return Token(kind, lexeme, pos, _number(kind, lexeme))
    as_bytes = lexeme[0] in "bB"
    body = lexeme[1:] if as_bytes else lexeme
    raw = kind == "raw"
    if raw:
        body = body[1:]
    quote = 3 if body[:3] in ('"""', "'''") else 1
    body = body[quote:-quote]
    kind = "BYTES_LIT" if as_bytes else "STRING_LIT"
    if raw:
        return Token(kind, lexeme, pos, body.encode() if as_bytes else body)
    return Token(kind, lexeme, pos, _unescape(body, as_bytes=as_bytes))


def _number(kind: str, lexeme: str) -> int | float:
    if kind == "FLOAT_LIT":
        return float(lexeme)
    digits = lexeme.rstrip("uU")
    negative = digits.startswith("-")
    digits = digits.lstrip("-")
    number = int(digits, 16) if digits.startswith("0x") else int(digits)
    number = -number if negative else number
    if kind == "UINT_LIT":
        if not 0 <= number <= _UINT_MAX:
            raise CelParseError(f"literal {lexeme} out of range")
        return Uint(number)
    if not _INT_RANGE[0] <= number <= _INT_RANGE[1]:
        raise CelParseError(f"literal {lexeme} out of range")
    return number


def _unescape(body: str, *, as_bytes: bool) -> str | bytes:
    """CEL's escapes: in a string ``\\x`` and octal name code points, in bytes octets."""
    if "\\" not in body:
        return body.encode() if as_bytes else body
    out: list[bytes] = []
    pos = 0
    for match in [*_ESCAPE.finditer(body), None]:
        plain = body[pos : match.start() if match else len(body)]
        if "\\" in plain:
            raise CelParseError("invalid escape sequence")
        out.append(plain.encode())
        if match is None:
            break
        simple, hex2, hex4, hex8, octal = match.groups()
        if simple:
            out.append(_SIMPLE_ESCAPES[simple].encode())
        elif hex2 or octal:
            number = int(hex2, 16) if hex2 else int(octal, 8)
            out.append(bytes([number]) if as_bytes else chr(number).encode())
        else:
            code_point = int(hex4 or hex8, 16)
            if code_point > 0x10FFFF or 0xD800 <= code_point <= 0xDFFF:
                raise CelParseError("invalid code point in an escape")
            out.append(chr(code_point).encode())
        pos = match.end()
    data = b"".join(out)
    if as_bytes:
        return data
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise CelParseError("invalid UTF-8 in a string literal") from None


# -- the parser -------------------------------------------------------------------------------

#: binary operator -> (precedence, rule, operator rule); ``||`` and ``&&`` have no operator
#: rule (their tree is ``[left, right]``), the others ``[operator([left]), right]``
_BINARY: dict[str, tuple[int, str, str | None]] = {
    "||": (1, "conditionalor", None),
    "&&": (2, "conditionaland", None),
    "<": (3, "relation", "relation_lt"),
    "<=": (3, "relation", "relation_le"),
    ">": (3, "relation", "relation_gt"),
    ">=": (3, "relation", "relation_ge"),
    "==": (3, "relation", "relation_eq"),
    "!=": (3, "relation", "relation_ne"),
    "in": (3, "relation", "relation_in"),
    "+": (4, "addition", "addition_add"),
    "-": (4, "addition", "addition_sub"),
    "*": (5, "multiplication", "multiplication_mul"),
    "/": (5, "multiplication", "multiplication_div"),
    "%": (5, "multiplication", "multiplication_mod"),
}
_END = Token("end of input", "", -1)


def parse(text: str) -> Tree:
    """The tree of the CEL expression ``text``, or :class:`CelParseError`."""
    parser = _Parser(text, tokenize(text))
    if not parser.tokens:
        raise CelParseError("empty expression")
    try:
        tree = parser.expr()
    except RecursionError:  # only from a caller already deep in the stack
        raise CelParseError("expression nested too deeply") from None
    parser.expect_end()
    if not isinstance(tree, Tree):
        raise CelParseError("not an expression")
    _check_depth(tree)
    return tree


def _check_depth(tree: Tree) -> None:
    """Refuse a tree deeper than :data:`MAX_DEPTH` (``a + a + ...`` nests leftward)."""
    stack: list[tuple[Node, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise CelParseError(f"expression nested more than {MAX_DEPTH} deep")
        if isinstance(node, Tree):
            stack.extend((child, depth + 1) for child in node.children)


class _Parser:
    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.at = 0
        self.nesting = 0

    # -- token stream -------------------------------------------------------------------------

    def peek(self) -> Token:
        return self.tokens[self.at] if self.at < len(self.tokens) else _END

    def next(self) -> Token:
        token = self.peek()
        self.at += 1
        return token

    def accept(self, kind: str) -> bool:
        if self.peek().type == kind:
            self.at += 1
            return True
        return False

    def expect(self, kind: str) -> Token:
        token = self.peek()
        if token.type != kind:
            raise self.error(f"expected {kind!r}")
        self.at += 1
        return token

    def expect_end(self) -> None:
        if self.at < len(self.tokens):
            raise self.error("expected end of input")

    def error(self, expected: str) -> CelParseError:
        token = self.peek()
        if token is _END:
            return CelParseError(f"{expected}, found the end of input")
        where = _where(self.text, token.pos)
        return CelParseError(f"{expected}, found {token.value!r} at {where}")

    # -- grammar ------------------------------------------------------------------------------

    def expr(self) -> Node:
        """``Expr = ConditionalOr ["?" ConditionalOr ":" Expr]``"""
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise CelParseError(f"brackets nested more than {MAX_NESTING} deep")
        condition = self.binary(1)
        if self.accept("?"):
            then = self.binary(1)
            self.expect(":")
            condition = Tree("expr", [condition, then, self.expr()])
        self.nesting -= 1
        return condition

    def binary(self, lowest: int) -> Node:
        """Left-associative binary operators of precedence ``lowest`` and up."""
        left = self.unary()
        while True:
            operator = _BINARY.get(self.peek().type)
            if operator is None or operator[0] < lowest:
                return left
            self.at += 1
            precedence, rule, operator_rule = operator
            right = self.binary(precedence + 1)
            if operator_rule is None:
                left = Tree(rule, [left, right])
            else:
                left = Tree(rule, [Tree(operator_rule, [left]), right])

    def unary(self) -> Node:
        """``!`` and ``-`` repeated, then a member."""
        operators: list[str] = []
        while self.peek().type in ("!", "-"):
            operators.append("unary_not" if self.next().type == "!" else "unary_neg")
        node = self.member()
        for operator in reversed(operators):
            node = Tree("unary", [Tree(operator, []), node])
        return node

    def member(self) -> Node:
        """A primary, then selections, calls, indexes and message constructions."""
        node = self.primary()
        while True:
            if self.accept("."):
                name = self.expect("IDENT")
                if self.accept("("):
                    node = Tree("member_dot_arg", [node, name, *self.arguments(")")])
                else:
                    node = Tree("member_dot", [node, name])
            elif self.accept("["):
                node = Tree("member_index", [node, self.expr()])
                self.expect("]")
            elif self.accept("{"):
                node = Tree("member_object", [node, *self.field_inits()])
            else:
                return node

    def primary(self) -> Node:
        token = self.next()
        kind = token.type
        if kind == "IDENT" or kind == ".":
            dotted = kind == "."
            name = self.expect("IDENT") if dotted else token
            if self.accept("("):
                data = "dot_ident_arg" if dotted else "ident_arg"
                return Tree(data, [name, *self.arguments(")")])
            return Tree("dot_ident" if dotted else "ident", [name])
        if kind == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind == "[":
            return Tree("list_lit", self.arguments("]", trailing_comma=True))
        if kind == "{":
            return Tree("map_lit", self.map_inits())
        if kind.endswith("_LIT"):
            return Tree("literal", [token])
        self.at -= 1
        raise self.error("expected an expression")

    def arguments(self, close: str, *, trailing_comma: bool = False) -> list[Node]:
        """``[ExprList] close`` as ``[exprlist]`` (nothing when the list is empty)."""
        items: list[Node] = []
        while not self.accept(close):
            if items:
                self.expect(",")
                if trailing_comma and self.accept(close):
                    break
            items.append(self.expr())
        return [Tree("exprlist", items)] if items else []

    def map_inits(self) -> list[Node]:
        """``[MapInits] [","] "}"`` as ``[mapinits]``: keys and values alternating."""
        items: list[Node] = []
        while not self.accept("}"):
            if items:
                self.expect(",")
                if self.accept("}"):
                    break
            items.append(self.expr())
            self.expect(":")
            items.append(self.expr())
        return [Tree("mapinits", items)] if items else []

    def field_inits(self) -> list[Node]:
        """``[FieldInits] [","] "}"`` as ``[fieldinits]``: names and values alternating."""
        items: list[Node] = []
        while not self.accept("}"):
            if items:
                self.expect(",")
                if self.accept("}"):
                    break
            items.append(self.expect("IDENT"))
            self.expect(":")
            items.append(self.expr())
        return [Tree("fieldinits", items)] if items else []
