"""Semantic validation of a model, with OpenFGA's language-validator error types.

Errors carry ``error_type`` (``missing-definition``, ``relation-no-entry-point``, ...), the
message upstream prints, the offending symbol and, when the model came from DSL text, a
0-based line and column span found the way upstream finds it: the symbol's first
whole-word occurrence on the line of the definition. Entry points are only examined when
nothing else is wrong. ``check_model`` turns the first error into OpenFGA's 2056, with
the server's entry-point search in place of the language validator's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bastion.core.fga.cel import ConditionError, compile_condition
from bastion.core.fga.dsl_parser import ParsedDsl
from bastion.core.fga.entrypoints import first_entrypoint_error
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.model import (
    AuthorizationModel,
    ComputedUserset,
    Difference,
    Intersection,
    Relation,
    Rewrite,
    SourceInfo,
    This,
    TupleToUserset,
    TypeDefinition,
    Union,
)
from bastion.core.fga.source_map import Loc, SourceMap
from bastion.core.fga.typesystem import rewrite_children

__all__ = ["ModelError", "check_model", "validate_model"]

_TYPE_NAME = re.compile(r"[^:#@*\s]{1,254}")
_RELATION_NAME = re.compile(r"[^:#@*\s]{1,50}")
_RESERVED = {"self", "this"}
_SCHEMAS = {"1.1", "1.2"}
_WORD_CHARS = r"[\w#:*./-]"


@dataclass(frozen=True, slots=True)
class ModelError:
    error_type: str
    message: str
    symbol: str = ""
    line: int | None = None
    column: int | None = None
    end_column: int | None = None
    file: str = ""


class _Validator:
    def __init__(
        self, model: AuthorizationModel, source: SourceMap | None, *, server: bool = False
    ) -> None:
        self.model = model
        self.source = source
        self.server = server
        self.errors: list[ModelError] = []
        self.types: dict[str, TypeDefinition] = {}
        for typedef in model.type_definitions:
            self.types.setdefault(typedef.name, typedef)

    # -- positions
    def _text(self, loc: Loc | None) -> str:
        return "" if self.source is None or loc is None else self.source.text(loc)

    def _find(self, loc: Loc | None, symbol: str, after: int = 0) -> tuple[int | None, int | None]:
        pattern = re.compile(rf"(?<!{_WORD_CHARS}){re.escape(symbol)}(?!{_WORD_CHARS})")
        match = pattern.search(self._text(loc), after)
        if match is None:
            return None, None
        return match.start(), match.end()

    def _error(
        self,
        error_type: str,
        message: str,
        symbol: str,
        loc: Loc | None,
        start: int | None,
        end: int | None,
    ) -> None:
        if loc is None or start is None:
            self.errors.append(ModelError(error_type, message, symbol))
        else:
            self.errors.append(ModelError(error_type, message, symbol, loc[1], start, end, loc[0]))

    def add(
        self,
        error_type: str,
        message: str,
        symbol: str,
        loc: Loc | None,
        *,
        search: str | None = None,
        after: int = 0,
    ) -> None:
        start, end = self._find(loc, search if search is not None else symbol, after)
        self._error(error_type, message, symbol, loc, start, end)

    def add_relation_name(
        self, error_type: str, message: str, type_name: str, relation: str
    ) -> None:
        """An error pointing at the name after ``define``."""
        loc = self.relation_line(type_name, relation)
        found = self._text(loc).find("define ")
        start = None if found < 0 else found + len("define ")
        end = None if start is None else start + len(relation)
        self._error(error_type, message, relation, loc, start, end)

    def type_line(self, name: str) -> Loc | None:
        return None if self.source is None else self.source.types.get(name)

    def relation_line(self, type_name: str, relation: str) -> Loc | None:
        return None if self.source is None else self.source.relations.get((type_name, relation))

    def _define_end(self, loc: Loc | None) -> int:
        return self._text(loc).find(":") + 1

    # -- checks
    def run(self) -> list[ModelError]:
        if not self._schema():
            return self.errors
        self._conditions_defined()
        seen: set[str] = set()
        for typedef in self.model.type_definitions:
            if typedef.name in seen:
                self.add(
                    "duplicated-error",
                    f"the type `{typedef.name}` is a duplicate.",
                    typedef.name,
                    self.type_line(typedef.name),
                )
                continue
            seen.add(typedef.name)
            self._type(typedef)
        if not self.server:
            # The language validator's rule only: OpenFGA's server accepts such a model.
            self._conditions_used()
        self._one_module_per_file()
        if self.errors:
            return self.errors
        if not self.server:
            self._entry_points()
        elif (message := first_entrypoint_error(self.model)) is not None:
            self.errors.append(ModelError("relation-no-entry-point", message))
        return self.errors

    def _schema(self) -> bool:
        if self.source is not None and self.source.module_file:
            self.errors.append(
                ModelError("schema-version-required", "schema version required", "", 0, 0, 0)
            )
            return False
        version = self.model.schema_version
        if not version:
            self.errors.append(ModelError("schema-version-required", "schema version required"))
            return False
        if version not in _SCHEMAS:
            schema = None if self.source is None else self.source.schema
            loc, column = schema if schema is not None else (None, None)
            end = None if column is None else column + len(version)
            self._error("invalid-schema", f"invalid schema {version}", version, loc, column, end)
            return False
        return True

    def _type(self, typedef: TypeDefinition) -> None:
        line = self.type_line(typedef.name)
        if typedef.name in _RESERVED:
            self.add(
                "reserved-type-keywords",
                "a type cannot be named 'self' or 'this'.",
                typedef.name,
                line,
            )
        elif not _TYPE_NAME.fullmatch(typedef.name):
            self.add(
                "invalid-name",
                f"type '{typedef.name}' does not match naming rule: '^[^:#@\\*\\s]{{1,254}}$'.",
                typedef.name,
                line,
            )
        for relation in typedef.relations.values():
            self._relation(typedef, relation)

    def _relation(self, typedef: TypeDefinition, relation: Relation) -> None:
        line = self.relation_line(typedef.name, relation.name)
        if relation.name in _RESERVED:
            self.add_relation_name(
                "reserved-relation-keywords",
                "a relation cannot be named 'self' or 'this'.",
                typedef.name,
                relation.name,
            )
        elif not _RELATION_NAME.fullmatch(relation.name):
            self.add_relation_name(
                "invalid-name",
                f"relation '{relation.name}' of type "
                f"'{typedef.name}' does not match naming rule: "
                "'^[^:#@\\*\\s]{1,50}$'.",
                typedef.name,
                relation.name,
            )
        after = self._define_end(line)
        seen_refs: set[str] = set()
        #: OpenFGA's server refuses only a repeat of a restriction without a condition
        #: (it accepts ``[user with c, user]``, which the language validator refuses).
        plain_refs: set[str] = set()
        for ref in relation.directly_related:
            symbol = str(ref).split(" with ")[0]
            earlier = plain_refs if self.server else seen_refs
            if symbol in earlier and not ref.condition:
                self.add(
                    "duplicated-error",
                    f"the type restriction `{symbol}` is a duplicate "
                    f"in the relation `{relation.name}`.",
                    symbol,
                    line,
                    after=after,
                )
            seen_refs.add(symbol)
            if not ref.condition:
                plain_refs.add(symbol)
            if ref.type not in self.types:
                self.add(
                    "invalid-type",
                    f"`{ref.type}` is not a valid type.",
                    ref.type,
                    line,
                    after=after,
                )
            elif ref.relation is not None and ref.relation not in self.types[ref.type].relations:
                self.add(
                    "invalid-relation-type",
                    f"`{ref.relation}` is not a valid relation for `{ref.type}`.",
                    symbol,
                    line,
                    after=after,
                )
        self._rewrite(typedef, relation, relation.rewrite, line, after)
        self._duplicates(relation, relation.rewrite, line, after)

    def _rewrite(
        self,
        typedef: TypeDefinition,
        relation: Relation,
        rewrite: Rewrite,
        line: Loc | None,
        after: int,
    ) -> None:
        match rewrite:
            case ComputedUserset(target):
                if target not in typedef.relations:
                    self.add(
                        "missing-definition",
                        f"the relation `{target}` does not exist.",
                        target,
                        line,
                        after=after,
                    )
            case TupleToUserset(tupleset, computed):
                self._ttu(typedef, tupleset, computed, line, after)
            case _:
                for child in rewrite_children(rewrite):
                    self._rewrite(typedef, relation, child, line, after)

    def _ttu(
        self, typedef: TypeDefinition, tupleset: str, computed: str, line: Loc | None, after: int
    ) -> None:
        text = f"{computed} from {tupleset}"
        definition = typedef.relations.get(tupleset)
        if definition is None:
            self.add(
                "invalid-relation-type",
                f"`{tupleset}` is not a valid relation for `{typedef.name}`.",
                text,
                line,
                after=after,
            )
            return
        if not isinstance(definition.rewrite, This) or any(
            ref.relation is not None or ref.wildcard for ref in definition.directly_related
        ):
            start, end = self._find(line, text, after)
            if start is not None and end is not None:
                start = end - len(tupleset)
            self._error(
                "tupleuserset-not-direct",
                f"`{tupleset}` relation used inside from allows only direct relation.",
                tupleset,
                line,
                start,
                end,
            )
            return
        parent_types = [ref.type for ref in definition.directly_related]
        if any(t in self.types and computed in self.types[t].relations for t in parent_types):
            return
        for parent in parent_types:
            self.add(
                "invalid-relation-on-tupleset",
                f"the `{computed}` relation definition on "
                f"type `{typedef.name}` is not valid: `{computed}` does not exist on "
                f"`{tupleset}`, which is of type `{parent}`.",
                text,
                line,
                after=after,
            )

    def _duplicates(
        self, relation: Relation, rewrite: Rewrite, line: Loc | None, after: int
    ) -> None:
        children = rewrite_children(rewrite)
        seen: set[str] = set()
        for child in children:
            symbol = _partial(child)
            if symbol is not None:
                if symbol in seen:
                    self.add(
                        "duplicated-error",
                        f"the partial relation definition `{symbol}` "
                        f"is a duplicate in the relation `{relation.name}`.",
                        symbol,
                        line,
                        after=after,
                    )
                seen.add(symbol)
            self._duplicates(relation, child, line, after)

    def _conditions_defined(self) -> None:
        for typedef in self.model.type_definitions:
            for relation in typedef.relations.values():
                line = self.relation_line(typedef.name, relation.name)
                for ref in relation.directly_related:
                    if ref.condition and ref.condition not in self.model.conditions:
                        self.add(
                            "condition-not-defined",
                            f"`{ref.condition}` is not a defined condition in the model.",
                            ref.condition,
                            line,
                            after=self._define_end(line),
                        )
        for key, condition in self.model.conditions.items():
            if condition.name and key != condition.name:
                self.errors.append(
                    ModelError(
                        "different-nested-condition-name",
                        f"condition key is `{key}` but nested name property is {condition.name}",
                        condition.name,
                    )
                )

    def _conditions_used(self) -> None:
        used = {
            ref.condition
            for t in self.model.type_definitions
            for r in t.relations.values()
            for ref in r.directly_related
        }
        for name in self.model.conditions:
            line = None if self.source is None else self.source.conditions.get(name)
            if name not in used:
                self.add(
                    "condition-not-used",
                    f"`{name}` condition is not used in the model.",
                    name,
                    line,
                    after=len("condition"),
                )

    def _one_module_per_file(self) -> None:
        """Schema 1.2: each source file must map back to a single module."""
        modules: dict[str, list[str]] = {}
        sources: list[SourceInfo | None] = []
        for typedef in self.model.type_definitions:
            sources.append(typedef.source)
            sources.extend(r.source for r in typedef.relations.values())
        sources.extend(c.source for c in self.model.conditions.values())
        for source in sources:
            if source is not None and source.file:
                found = modules.setdefault(source.file, [])
                if source.module not in found:
                    found.append(source.module)
        for file, names in modules.items():
            if len(names) > 1:
                self.errors.append(
                    ModelError(
                        "multiple-modules-in-file",
                        f"file {file} would contain multiple module "
                        f"definitions ({', '.join(names)}) when transforming to DSL. "
                        "Only one module can be defined per file.",
                        file,
                    )
                )

    def _entry_points(self) -> None:
        for typedef in self.types.values():
            for relation in typedef.relations.values():
                ok, loop = self._entry(
                    typedef.name,
                    relation.name,
                    relation.rewrite,
                    frozenset({(typedef.name, relation.name)}),
                )
                if not ok:
                    reason = "potential loop" if loop else "no entrypoint"
                    self.add_relation_name(
                        "relation-no-entry-point",
                        f"`{relation.name}` is an impossible "
                        f"relation for `{typedef.name}` ({reason}).",
                        typedef.name,
                        relation.name,
                    )

    def _entry(
        self, type_name: str, relation: str, rewrite: Rewrite, visited: frozenset[tuple[str, str]]
    ) -> tuple[bool, bool]:
        """(has an entry point, the search met a computed-relation loop)."""
        typedef = self.types[type_name]
        match rewrite:
            case This():
                return self._direct_entry(typedef.relations[relation], visited), False
            case ComputedUserset(target):
                if (type_name, target) in visited:
                    return False, True
                return self._entry(
                    type_name,
                    target,
                    typedef.relations[target].rewrite,
                    visited | {(type_name, target)},
                )
            case TupleToUserset(tupleset, computed):
                for ref in typedef.relations[tupleset].directly_related:
                    parent = self.types[ref.type]
                    if computed in parent.relations and (ref.type, computed) not in visited:
                        ok, _ = self._entry(
                            ref.type,
                            computed,
                            parent.relations[computed].rewrite,
                            visited | {(ref.type, computed)},
                        )
                        if ok:
                            return True, False
                return False, False
            case Union(children):
                results = [self._entry(type_name, relation, c, visited) for c in children]
                return any(ok for ok, _ in results), any(loop for _, loop in results)
            case Intersection(children):
                results = [self._entry(type_name, relation, c, visited) for c in children]
                return all(ok for ok, _ in results), any(loop for _, loop in results)
            case Difference(base, subtract):
                results = [self._entry(type_name, relation, c, visited) for c in (base, subtract)]
                return all(ok for ok, _ in results), any(loop for _, loop in results)

    def _direct_entry(self, relation: Relation, visited: frozenset[tuple[str, str]]) -> bool:
        for ref in relation.directly_related:
            if ref.relation is None:
                return True
            key = (ref.type, ref.relation)
            if key not in visited:
                target = self.types[ref.type].relations[ref.relation]
                if self._entry(ref.type, ref.relation, target.rewrite, visited | {key})[0]:
                    return True
        return False


def _partial(rewrite: Rewrite) -> str | None:
    match rewrite:
        case ComputedUserset(target):
            return target
        case TupleToUserset(tupleset, computed):
            return f"{computed} from {tupleset}"
        case _:
            return None


def validate_model(
    model: AuthorizationModel, source: ParsedDsl | SourceMap | None = None
) -> list[ModelError]:
    """Every semantic error of ``model`` (empty when valid), located via ``source``."""
    if isinstance(source, ParsedDsl):
        source = SourceMap.of(source)
    return _Validator(model, source).run()


def check_model(model: AuthorizationModel) -> None:
    """Raise OpenFGA's 2056 for an invalid model, including conditions that do not compile.

    Entry points are searched the way the server searches them, not the way the language
    validator does (see ``entrypoints``): the two disagree on some models.
    """
    errors = _Validator(model, None, server=True).run()
    if errors:
        raise FgaError(ErrorCode.INVALID_AUTHORIZATION_MODEL, errors[0].message)
    for condition in model.conditions.values():
        try:
            compile_condition(condition)
        except ConditionError as exc:
            raise FgaError(ErrorCode.INVALID_AUTHORIZATION_MODEL, str(exc)) from exc
