"""Modular models (schema 1.2): several ``module`` files combined into one model.

Types keep the order of the files (as given) and of their definitions; ``extend type``
blocks then add their relations to the type, tagged with the extending module and file,
as are types and conditions. Problems are collected rather than raised, each pointing at a
file, line and column: syntax errors, files without a ``module`` header, extending a type
that does not exist, a relation or condition defined twice, and then every semantic error
of the combined model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from bastion.core.fga.dsl_lexer import DslSyntaxError
from bastion.core.fga.dsl_parser import ParsedDsl, parse_dsl
from bastion.core.fga.model import (
    AuthorizationModel,
    Condition,
    Relation,
    SourceInfo,
    TypeDefinition,
)
from bastion.core.fga.source_map import SourceMap
from bastion.core.fga.validation import validate_model

__all__ = ["CombinedModel", "ModuleError", "combine_modules", "model_modules"]


@dataclass(frozen=True, slots=True)
class ModuleError:
    message: str
    file: str
    line: int
    column: int
    end_column: int
    kind: str = ""  #: "syntax" for parse errors, else the semantic error type (may be "")


@dataclass
class CombinedModel:
    model: AuthorizationModel
    errors: list[ModuleError] = field(default_factory=list)

    @property
    def modules(self) -> list[str]:
        return model_modules(self.model)


def model_modules(model: AuthorizationModel) -> list[str]:
    """The sorted names of the modules a (schema 1.2) model was combined from."""
    sources = [t.source for t in model.type_definitions]
    sources += [r.source for t in model.type_definitions for r in t.relations.values()]
    sources += [c.source for c in model.conditions.values()]
    return sorted({s.module for s in sources if s is not None and s.module})


def _word_at(source: SourceMap, file: str, line: int, word: str, after: int = 0) -> int:
    text = source.lines.get(file, [""])[line] if line < len(source.lines.get(file, [])) else ""
    found = text.find(word, after)
    return max(found, 0)


def combine_modules(files: Mapping[str, str]) -> CombinedModel:
    """Combine ``{file name: DSL text}`` into one schema 1.2 model, collecting errors."""
    errors: list[ModuleError] = []
    parsed: dict[str, ParsedDsl] = {}
    source = SourceMap()
    for name, text in files.items():
        try:
            result = parse_dsl(text)
        except DslSyntaxError as exc:
            errors.append(
                ModuleError(exc.msg, name, exc.line, exc.column, exc.end_column, "syntax")
            )
            continue
        if result.module is None:
            errors.append(ModuleError("file is not a module", name, 0, 0, 0))
            continue
        parsed[name] = result
        source.lines[name] = result.lines

    types: dict[str, dict[str, Relation]] = {}
    type_sources: dict[str, SourceInfo] = {}
    conditions: dict[str, Condition] = {}
    for name, result in parsed.items():
        module = result.module or ""
        for typedef in result.model.type_definitions:
            if typedef.name in result.extended:
                continue
            types.setdefault(typedef.name, {}).update(typedef.relations)
            type_sources.setdefault(typedef.name, SourceInfo(module, name))
            source.types.setdefault(typedef.name, (name, result.type_lines[typedef.name]))
            for rel_name in typedef.relations:
                source.relations[(typedef.name, rel_name)] = (
                    name,
                    result.relation_lines[(typedef.name, rel_name)],
                )
        for cond_name, condition in result.model.conditions.items():
            line = result.condition_lines[cond_name]
            if cond_name in conditions:
                column = _word_at(source, name, line, cond_name, len("condition"))
                errors.append(
                    ModuleError(
                        f"duplicate condition {cond_name}",
                        name,
                        line,
                        column,
                        column + len(cond_name),
                    )
                )
                continue
            conditions[cond_name] = Condition(
                condition.name, condition.expression, condition.parameters, SourceInfo(module, name)
            )
            source.conditions[cond_name] = (name, line)

    for name, result in parsed.items():
        module = result.module or ""
        for typedef in result.model.type_definitions:
            if typedef.name not in result.extended:
                continue
            line = result.type_lines[typedef.name]
            if typedef.name not in types:
                column = _word_at(source, name, line, typedef.name, len("extend type"))
                errors.append(
                    ModuleError(
                        f"extended type {typedef.name} does not exist",
                        name,
                        line,
                        column,
                        column + len(typedef.name),
                    )
                )
                continue
            for rel_name, relation in typedef.relations.items():
                rel_line = result.relation_lines[(typedef.name, rel_name)]
                if rel_name in types[typedef.name]:
                    column = _word_at(source, name, rel_line, rel_name, len("    define"))
                    errors.append(
                        ModuleError(
                            f"relation {rel_name} already exists on type {typedef.name}",
                            name,
                            rel_line,
                            column,
                            column + len(rel_name),
                        )
                    )
                    continue
                types[typedef.name][rel_name] = Relation(
                    rel_name, relation.rewrite, relation.directly_related, SourceInfo(module, name)
                )
                source.relations[(typedef.name, rel_name)] = (name, rel_line)

    model = AuthorizationModel(
        "1.2",
        tuple(TypeDefinition(t, relations, type_sources[t]) for t, relations in types.items()),
        conditions,
    )
    for error in validate_model(model, source):
        if error.line is not None and error.column is not None:
            errors.append(
                ModuleError(
                    error.message,
                    error.file,
                    error.line,
                    error.column,
                    error.end_column or error.column,
                    error.error_type,
                )
            )
        else:
            errors.append(ModuleError(error.message, "", 0, 0, 0, error.error_type))
    return CombinedModel(model, errors)
