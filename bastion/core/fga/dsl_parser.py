"""DSL text -> :class:`AuthorizationModel` (schema 1.1, and single module files of 1.2).

A recursive-descent parser over :mod:`core.fga.dsl_lexer`. It enforces the grammar's
rules: one kind of operator per nesting level, ``but not`` binary, and a direct assignment
``[...]`` only as the first operand of the top level (or of a first parenthesised group).
Duplicate relations, conditions and parameters are reported here, as upstream does.
The result also carries the line of every type and relation, so that semantic validation
can point at the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bastion.core.fga.dsl_lexer import DslSyntaxError, Lexer, Tok, Token
from bastion.core.fga.model import (
    PARAM_TYPE_NAMES,
    AuthorizationModel,
    ComputedUserset,
    Condition,
    ConditionParam,
    Difference,
    Intersection,
    Relation,
    RelationRef,
    Rewrite,
    SourceInfo,
    This,
    TupleToUserset,
    TypeDefinition,
    Union,
)

__all__ = ["ParsedDsl", "parse_dsl", "parse_model"]

_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_EXTENDED_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:[./][A-Za-z0-9_-]+)*")
_SCHEMA_VERSION = re.compile(r"[0-9]+\.[0-9]+")
_KEYWORDS_AS_NAMES = {"model", "schema", "type", "relation", "module", "extend"}
_RESERVED = {"define", "relations", "and", "or", "from", "with", "condition", "but"}
_SCALARS = {"bool", "string", "int", "uint", "double", "duration", "timestamp", "ipaddress"}


@dataclass
class ParsedDsl:
    """A parsed file: the model, where things are, and the module header if any."""

    model: AuthorizationModel
    lines: list[str]
    type_lines: dict[str, int] = field(default_factory=dict)
    relation_lines: dict[tuple[str, str], int] = field(default_factory=dict)
    condition_lines: dict[str, int] = field(default_factory=dict)
    module: str | None = None
    extended: set[str] = field(default_factory=set)
    schema_position: tuple[int, int] = (0, 0)


class _Parser:
    def __init__(self, text: str) -> None:
        self.lex = Lexer(text)
        self.lines = self.lex.text.split("\n")

    # -- token helpers
    def error(self, token: Token, message: str) -> DslSyntaxError:
        return DslSyntaxError(
            message, token.line, token.column, end_column=token.column + len(token.text)
        )

    def _no_viable(self, token: Token) -> DslSyntaxError:
        """ANTLR's wording for a line that starts with an unexpected word."""
        indent = " " * token.column
        return self.error(token, f"no viable alternative at input '\\n{indent}{token.text}'")

    def expect_word(self, word: str | None = None) -> Token:
        token = self.lex.next()
        if token.kind is not Tok.WORD or (word is not None and token.text != word):
            wanted = f"'{word}'" if word else "IDENTIFIER"
            raise self.error(token, f"mismatched input '{token.text}' expecting {wanted}")
        return token

    def expect_punct(self, char: str) -> Token:
        token = self.lex.next()
        if token.kind is not Tok.PUNCT or token.text != char:
            raise self.error(token, f"mismatched input '{token.text}' expecting '{char}'")
        return token

    def expect_newline_or_eof(self) -> None:
        token = self.lex.next()
        if token.kind not in (Tok.NEWLINE, Tok.EOF):
            raise self.error(token, f"extraneous input '{token.text}' expecting {{<EOF>, NEWLINE}}")

    def skip_newlines(self) -> None:
        while self.lex.peek().kind is Tok.NEWLINE:
            self.lex.next()

    def name(self, pattern: re.Pattern[str]) -> Token:
        token = self.lex.next()
        ok = token.kind is Tok.WORD and pattern.fullmatch(token.text) is not None
        if not ok or (token.text in _RESERVED and token.text not in _KEYWORDS_AS_NAMES):
            raise self.error(token, f"mismatched input '{token.text}' expecting IDENTIFIER")
        return token

    def at_word(self, word: str) -> bool:
        token = self.lex.peek()
        return token.kind is Tok.WORD and token.text == word

    def at_punct(self, char: str) -> bool:
        token = self.lex.peek()
        return token.kind is Tok.PUNCT and token.text == char

    # -- grammar
    def parse(self) -> ParsedDsl:
        self.skip_newlines()
        schema = "1.1"
        module: str | None = None
        schema_position = (0, 0)
        first = self.lex.next()
        if first.kind is Tok.WORD and first.text == "model":
            if self.lex.peek().kind is not Tok.NEWLINE:
                raise self.error(self.lex.peek(), "mismatched input expecting NEWLINE")
            self.skip_newlines()
            self.expect_word("schema")
            version = self.lex.next()
            if version.kind is not Tok.WORD or not _SCHEMA_VERSION.fullmatch(version.text):
                raise self.error(
                    version, f"mismatched input '{version.text}' expecting SCHEMA_VERSION"
                )
            schema = version.text
            schema_position = (version.line, version.column)
        elif first.kind is Tok.WORD and first.text == "module":
            if self.lex.peek().kind is not Tok.WORD:
                raise self.error(self.lex.peek(), "mismatched input expecting WHITESPACE")
            module = self.name(_EXTENDED_ID).text
            schema = "1.2"
        else:
            raise self.error(
                first,
                f"extraneous input '{first.text}' expecting {{'#', 'module', 'model', NEWLINE}}",
            )
        self.expect_newline_or_eof()
        result = ParsedDsl(
            AuthorizationModel(schema, ()),
            self.lines,
            module=module,
            schema_position=schema_position,
        )
        types: list[TypeDefinition] = []
        conditions: dict[str, Condition] = {}
        self.skip_newlines()
        while self.at_word("type") or self.at_word("extend"):
            types.append(self.type_definition(result))
            self.skip_newlines()
        while self.at_word("condition"):
            cond = self.condition(result)
            conditions[cond.name] = cond
            self.skip_newlines()
        token = self.lex.next()
        if token.kind is not Tok.EOF:
            raise self._no_viable(token)
        source = SourceInfo(module, "") if module else None
        if source is not None:
            types = [TypeDefinition(t.name, t.relations, source) for t in types]
        result.model = AuthorizationModel(schema, tuple(types), conditions)
        return result

    def type_definition(self, result: ParsedDsl) -> TypeDefinition:
        keyword = self.lex.next()
        extend = keyword.text == "extend"
        if extend:
            self.expect_word("type")
        name = self.name(_EXTENDED_ID)
        if extend:
            if result.module is None:
                raise self.error(name, "extend can only be used in a modular model")
            if name.text in result.extended:
                raise self.error(name, f"'{name.text}' is already extended in file.")
            result.extended.add(name.text)
        result.type_lines.setdefault(name.text, name.line)
        relations: dict[str, Relation] = {}
        after = self.lex.next()
        if after.kind is Tok.EOF:
            return TypeDefinition(name.text, relations)
        if after.kind is not Tok.NEWLINE:
            raise self.error(after, f"extraneous input '{after.text}' expecting NEWLINE")
        if not self.at_word("relations"):
            token = self.lex.peek()
            if token.kind is Tok.WORD and token.text not in ("type", "extend", "condition"):
                raise self._no_viable(token)
            return TypeDefinition(name.text, relations)
        self.lex.next()
        self.expect_newline_or_eof()
        if not self.at_word("define"):
            raise self.error(self.lex.peek(), "mismatched input expecting 'define'")
        while self.at_word("define"):
            self.lex.next()
            rel_name = self.name(_EXTENDED_ID)
            if rel_name.text in relations:
                raise self.error(rel_name, f"'{rel_name.text}' is already defined in '{name.text}'")
            result.relation_lines[(name.text, rel_name.text)] = rel_name.line
            self.expect_punct(":")
            refs: list[RelationRef] = []
            rewrite = self.expression(refs, allow_direct=True)
            relations[rel_name.text] = Relation(rel_name.text, rewrite, tuple(refs))
            self.expect_newline_or_eof()
            self.skip_newlines()
        token = self.lex.peek()
        if token.kind is Tok.WORD and token.text not in ("type", "extend", "condition"):
            raise self._no_viable(token)
        return TypeDefinition(name.text, relations)

    def expression(self, refs: list[RelationRef], *, allow_direct: bool) -> Rewrite:
        first = self.operand(refs, allow_direct=allow_direct)
        token = self.lex.peek()
        if token.kind is Tok.BUT_NOT:
            self.lex.next()
            return Difference(first, self.operand(refs, allow_direct=False))
        if token.kind is Tok.WORD and token.text in ("or", "and"):
            operator = token.text
            children = [first]
            while self.at_word(operator):
                self.lex.next()
                children.append(self.operand(refs, allow_direct=False))
            kind = Union if operator == "or" else Intersection
            return kind(tuple(children))
        return first

    def operand(self, refs: list[RelationRef], *, allow_direct: bool) -> Rewrite:
        token = self.lex.peek()
        if token.kind is Tok.PUNCT and token.text == "[":
            if not allow_direct:
                raise self.error(token, "extraneous input '[' expecting {'(', IDENTIFIER}")
            self.direct_assignment(refs)
            return This()
        if token.kind is Tok.PUNCT and token.text == "(":
            self.lex.next()
            inner = self.expression(refs, allow_direct=allow_direct)
            closing = self.lex.next()
            if closing.kind is not Tok.PUNCT or closing.text != ")":
                raise self.error(closing, f"extraneous input '{closing.text}' expecting ')'")
            return inner
        name = self.name(_EXTENDED_ID)
        if self.at_word("from"):
            self.lex.next()
            tupleset = self.name(_EXTENDED_ID)
            return TupleToUserset(tupleset.text, name.text)
        return ComputedUserset(name.text)

    def direct_assignment(self, refs: list[RelationRef]) -> None:
        self.expect_punct("[")
        while True:
            self.skip_newlines()
            type_name = self.name(_EXTENDED_ID).text
            relation: str | None = None
            wildcard = False
            if self.at_punct(":"):
                self.lex.next()
                self.expect_punct("*")
                wildcard = True
            elif self.at_punct("#"):
                self.lex.next()
                relation = self.name(_EXTENDED_ID).text
            condition = ""
            if self.at_word("with"):
                self.lex.next()
                condition = self.name(_PLAIN_ID).text
            refs.append(RelationRef(type_name, relation, wildcard, condition))
            self.skip_newlines()
            token = self.lex.next()
            if token.kind is Tok.PUNCT and token.text == "]":
                return
            if token.kind is not Tok.PUNCT or token.text != ",":
                raise self.error(token, f"mismatched input '{token.text}' expecting {{',', ']'}}")

    def condition(self, result: ParsedDsl) -> Condition:
        self.lex.next()
        name = self.name(_PLAIN_ID)
        if name.text in result.condition_lines:
            raise self.error(name, f"condition '{name.text}' is already defined in the model")
        result.condition_lines[name.text] = name.line
        self.expect_punct("(")
        params: dict[str, ConditionParam] = {}
        while True:
            self.skip_newlines()
            pname = self.name(_PLAIN_ID)
            if self.at_punct(")") or self.at_punct(","):
                raise self.error(pname, f"mismatched input '{pname.text}' expecting IDENTIFIER")
            if pname.text in params:
                raise self.error(
                    pname,
                    f"parameter '{pname.text}' is already defined in the condition '{name.text}'",
                )
            self.expect_punct(":")
            params[pname.text] = self.param_type()
            self.skip_newlines()
            token = self.lex.next()
            if token.kind is Tok.PUNCT and token.text == ")":
                break
            if token.kind is not Tok.PUNCT or token.text != ",":
                raise self.error(token, f"mismatched input '{token.text}' expecting {{',', ')'}}")
        self.expect_punct("{")
        body, _, _ = self.lex.raw_block()
        self.expect_newline_or_eof()
        source = SourceInfo(result.module, "") if result.module else None
        return Condition(name.text, body.strip(), params, source)

    def param_type(self) -> ConditionParam:
        token = self.lex.next()
        if token.kind is Tok.WORD and token.text in _SCALARS:
            return ConditionParam(PARAM_TYPE_NAMES[token.text])
        if token.kind is Tok.WORD and token.text in ("map", "list"):
            self.expect_punct("<")
            inner = self.lex.next()
            if inner.kind is not Tok.WORD or inner.text not in _SCALARS:
                raise self.error(
                    inner, f"mismatched input '{inner.text}' expecting CONDITION_PARAM_TYPE"
                )
            self.expect_punct(">")
            return ConditionParam(PARAM_TYPE_NAMES[token.text], (PARAM_TYPE_NAMES[inner.text],))
        raise self.error(token, f"mismatched input '{token.text}' expecting CONDITION_PARAM_TYPE")


def parse_dsl(text: str) -> ParsedDsl:
    """Parse a DSL file; raises :class:`DslSyntaxError` with a 0-based line and column."""
    return _Parser(text).parse()


def parse_model(text: str) -> AuthorizationModel:
    """Parse a (non-modular) DSL model into its JSON-shaped model."""
    return parse_dsl(text).model
