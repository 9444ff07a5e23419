"""Email templates in the placeholder subset of Go templates that Authorizer's use.

Rules / theory of operation:

- A template is text with actions between ``{{`` and ``}}``. The only actions accepted
  are a field path, ``{{.user.email}}``, ``{{ .verification_url }}`` (dots and identifiers,
  spaces around it allowed), and comments ``{{/* ... */}}``. Anything else Go templates
  can do (pipelines, function calls, ``range`` / ``if`` / ``with``, variables, trim
  markers) is refused by :func:`compile_template` with the reason and the line, so that a
  broken or overreaching template is rejected when it is saved, not when mail is sent.
- Rendering looks field paths up in the variables given and nowhere else: no attribute
  access, no method calls, nothing about the process. A missing field renders as the
  empty string, as does a nested object; ``true`` / ``false`` render as Go does.
- HTML bodies escape every value (``escape=True``); subjects are plain text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Template", "TemplateSyntaxError", "compile_template", "render"]

_FIELD_PATH = re.compile(r"\s*((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


class TemplateSyntaxError(ValueError):
    """The template uses something outside the accepted subset; ``str()`` says what and where."""


@dataclass(frozen=True, slots=True)
class Template:
    #: Literal text and field paths, alternating: ``str`` is text, ``tuple`` a path.
    parts: tuple[str | tuple[str, ...], ...]


def _line(source: str, index: int) -> int:
    return source.count("\n", 0, index) + 1


def _refusal(action: str) -> str:
    words = action.split()
    if not words:
        return "an empty action {{}}"
    first = words[0]
    if first in {"if", "else", "end", "range", "with", "define", "template", "block"}:
        return f"'{first}' is not supported (only field paths such as {{{{.user.email}}}})"
    if action.startswith("-") or action.endswith("-"):
        return "trim markers ({{- / -}}) are not supported"
    if "|" in action:
        return "pipelines are not supported (only field paths such as {{.user.email}})"
    if first.startswith("$"):
        return "variables are not supported (only field paths such as {{.user.email}})"
    if first == ".":
        return "{{.}} is not supported: name a field, such as {{.user.email}}"
    return (
        f"'{action.strip()}' is not a field path (only field paths such as {{{{.user.email}}}}"
        "; function calls are not supported)"
    )


def compile_template(source: str) -> Template:
    """Parse ``source``; raises :class:`TemplateSyntaxError` with the reason and line."""
    parts: list[str | tuple[str, ...]] = []
    position = 0
    while True:
        start = source.find("{{", position)
        if start < 0:
            parts.append(source[position:])
            break
        parts.append(source[position:start])
        end = source.find("}}", start + 2)
        if end < 0:
            raise TemplateSyntaxError(f"line {_line(source, start)}: unclosed action '{{{{'")
        action = source[start + 2 : end]
        position = end + 2
        if _COMMENT.fullmatch(action.strip()):
            continue
        match = _FIELD_PATH.fullmatch(action)
        if match is None:
            raise TemplateSyntaxError(f"line {_line(source, start)}: {_refusal(action)}")
        parts.append(tuple(match.group(1).split(".")[1:]))
    return Template(tuple(part for part in parts if part != ""))


def _lookup(variables: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = variables
    for name in path:
        if not isinstance(value, Mapping) or name not in value:
            return None
        value = value[name]
    return value


def _text(value: Any) -> str:
    if value is None or isinstance(value, Mapping | list | tuple):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render(template: Template, variables: Mapping[str, Any], *, escape: bool) -> str:
    """The template filled in from ``variables`` (values HTML-escaped when ``escape``)."""
    out: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value = _text(_lookup(variables, part))
        out.append(html.escape(value, quote=True) if escape else value)
    return "".join(out)
