"""Tokens of OpenFGA's modelling language, with 0-based line and column.

Before lexing, comments go the way OpenFGA's transformer removes them: a line whose first
non-blank character is ``#`` becomes empty, and elsewhere everything from the first
`` #`` (space, hash) is dropped. Line numbers are kept, so errors point at the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

__all__ = ["DslSyntaxError", "Lexer", "Tok", "Token", "strip_comments"]


class DslSyntaxError(ValueError):
    """A DSL text that does not parse; ``line`` and ``column`` are 0-based."""

    def __init__(
        self,
        message: str,
        line: int,
        column: int,
        *,
        end_column: int | None = None,
        error_type: str = "syntax",
        symbol: str = "",
    ) -> None:
        super().__init__(f"{error_type} error at line={line}, column={column}: {message}")
        self.msg = message
        self.line = line
        self.column = column
        self.end_column = column if end_column is None else end_column
        self.error_type = error_type
        self.symbol = symbol


class Tok(Enum):
    NEWLINE = "newline"  #: one or more line breaks
    WORD = "word"  #: identifiers, keywords, version numbers
    BUT_NOT = "but not"  #: the two-word operator, exactly one space apart
    PUNCT = "punct"  #: one of ``[ ] ( ) : , # * { } < >``
    EOF = "eof"


@dataclass(frozen=True, slots=True)
class Token:
    kind: Tok
    text: str
    line: int
    column: int


_WORD = re.compile(r"[A-Za-z0-9_./\-]+")
_PUNCT = set("[](),:#*{}<>")
_BLANK = " \t\f"


def strip_comments(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        if line.lstrip(_BLANK + "\r").startswith("#"):
            lines.append("")
            continue
        cut = line.find(" #")
        if cut >= 0:
            line = line[:cut]
        lines.append(line.rstrip())
    return "\n".join(lines)


class Lexer:
    """A cursor over the comment-stripped text; ``raw_block`` serves condition bodies."""

    def __init__(self, text: str) -> None:
        self.text = strip_comments(text)
        self.pos = 0
        self.line = 0
        self.line_start = 0
        self._peeked: Token | None = None

    def _skip_blanks(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _BLANK + "\r":
            self.pos += 1

    def _scan(self) -> Token:
        self._skip_blanks()
        if self.pos >= len(self.text):
            return Token(Tok.EOF, "<EOF>", self.line, self.pos - self.line_start)
        char = self.text[self.pos]
        column = self.pos - self.line_start
        if char == "\n":
            start_line = self.line
            while self.pos < len(self.text) and self.text[self.pos] in "\n" + _BLANK + "\r":
                if self.text[self.pos] == "\n":
                    self.line += 1
                    self.line_start = self.pos + 1
                self.pos += 1
            return Token(Tok.NEWLINE, "\\n", start_line, column)
        if char in _PUNCT:
            self.pos += 1
            return Token(Tok.PUNCT, char, self.line, column)
        match = _WORD.match(self.text, self.pos)
        if match is None:
            raise DslSyntaxError(f"token recognition error at: '{char}'", self.line, column)
        self.pos = match.end()
        word = match.group()
        if word == "but" and self.text.startswith(" not", self.pos):
            after = self.pos + 4
            if after >= len(self.text) or not _WORD.match(self.text, after):
                self.pos = after
                return Token(Tok.BUT_NOT, "but not", self.line, column)
        return Token(Tok.WORD, word, self.line, column)

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Token:
        token = self.peek()
        self._peeked = None
        return token

    def raw_block(self) -> tuple[str, int, int]:
        """Return the text up to the ``}`` matching an already consumed ``{``.

        Braces inside CEL string literals do not count. The closing brace is consumed.
        """
        if self._peeked is not None:
            raise RuntimeError("raw_block after peek")
        depth = 1
        start = self.pos
        quote = ""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if quote:
                if char == "\\":
                    self.pos += 1
                elif char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    body = self.text[start : self.pos]
                    self.pos += 1
                    return body, self.line, self.pos - self.line_start
            if char == "\n":
                self.line += 1
                self.line_start = self.pos + 1
            self.pos += 1
        raise DslSyntaxError("missing '}' at '<EOF>'", self.line, self.pos - self.line_start)
