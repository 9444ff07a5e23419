"""Model -> DSL text, byte for byte as OpenFGA's JSON->DSL transformer prints it.

Relations print in alphabetical order, conditions and their parameters by name (in a
modular model, relations added by ``extend`` follow the type's own, ordered by module,
file and name; conditions by module, file and name). A direct
assignment moves to the front of its union or intersection; where the DSL still cannot
express it (after ``but not``, or not first in a nested group) printing fails the way
upstream does.
"""

from __future__ import annotations

from bastion.core.fga.model import (
    PARAM_TYPE_NAMES,
    AuthorizationModel,
    ComputedUserset,
    Condition,
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

__all__ = ["UnsupportedDslError", "print_model"]

_PARAM_NAMES = {v: k for k, v in PARAM_TYPE_NAMES.items()}


class UnsupportedDslError(ValueError):
    """A JSON model the DSL cannot express."""


class _Unsupported(Exception):
    pass


def _expression(rewrite: Rewrite, relation: Relation, *, direct_ok: bool, nested: bool) -> str:
    match rewrite:
        case This():
            if not direct_ok:
                raise _Unsupported
            return "[" + ", ".join(str(ref) for ref in relation.directly_related) + "]"
        case ComputedUserset(computed):
            return computed
        case TupleToUserset(tupleset, computed):
            return f"{computed} from {tupleset}"
        case Union(children) | Intersection(children):
            operator = " or " if isinstance(rewrite, Union) else " and "
            ordered = sorted(children, key=lambda c: not isinstance(c, This))
            text = operator.join(
                _expression(c, relation, direct_ok=direct_ok and i == 0, nested=True)
                for i, c in enumerate(ordered)
            )
            return f"({text})" if nested else text
        case Difference(base, subtract):
            text = (
                _expression(base, relation, direct_ok=direct_ok, nested=True)
                + " but not "
                + _expression(subtract, relation, direct_ok=False, nested=True)
            )
            return f"({text})" if nested else text


def _relation(typedef: TypeDefinition, relation: Relation, comments: bool) -> str:
    try:
        body = _expression(relation.rewrite, relation, direct_ok=True, nested=False)
    except _Unsupported:
        raise UnsupportedDslError(
            f"the '{relation.name}' relation definition under the '{typedef.name}' type is not "
            "supported by the OpenFGA DSL syntax yet"
        ) from None
    comment = ""
    if comments and _extended(typedef, relation) and relation.source is not None:
        comment = f" # extended by: {_where(relation.source)}"
    return f"    define {relation.name}: {body}{comment}\n"


def _param_type(type_name: str, generic: tuple[str, ...]) -> str:
    name = _PARAM_NAMES.get(type_name, type_name)
    if generic:
        return f"{name}<{_PARAM_NAMES.get(generic[0], generic[0])}>"
    return name


def _condition(condition: Condition, comments: bool) -> str:
    params = ", ".join(
        f"{name}: {_param_type(p.type_name, p.generic)}"
        for name, p in sorted(condition.parameters.items())
    )
    comment = f" # {_where(condition.source)}" if comments and condition.source else ""
    return f"condition {condition.name}({params}) {{\n  {condition.expression}\n}}{comment}\n"


def _where(source: SourceInfo) -> str:
    return f"module: {source.module}, file: {source.file}"


def _extended(typedef: TypeDefinition, relation: Relation) -> bool:
    return relation.source is not None and relation.source != typedef.source


def _relation_order(typedef: TypeDefinition, relation: Relation) -> tuple[int, str, str, str]:
    if _extended(typedef, relation) and relation.source is not None:
        return (1, relation.source.module, relation.source.file, relation.name)
    return (0, "", "", relation.name)


def _type_order(typedef: TypeDefinition) -> tuple[str, str, str]:
    """Modular models print by module and file; others keep their order (stable sort)."""
    source = typedef.source
    return (source.module, source.file, typedef.name) if source else ("", "", "")


def _condition_order(condition: Condition) -> tuple[str, str, str]:
    source = condition.source
    return (source.module, source.file, condition.name) if source else ("", "", condition.name)


def print_model(model: AuthorizationModel, *, source_comments: bool = False) -> str:
    """The DSL text of ``model``; raises :class:`UnsupportedDslError` if inexpressible.

    ``source_comments`` adds ``# module: m, file: f`` notes to a modular model's parts.
    """
    out = [f"model\n  schema {model.schema_version}\n"]
    for typedef in sorted(model.type_definitions, key=_type_order):
        comment = ""
        if source_comments and typedef.source is not None:
            comment = f" # {_where(typedef.source)}"
        out.append(f"\ntype {typedef.name}{comment}\n")
        if typedef.relations:
            out.append("  relations\n")
            keyed = {_relation_order(typedef, r): r for r in typedef.relations.values()}
            for order in sorted(keyed):
                out.append(_relation(typedef, keyed[order], source_comments))
    for condition in sorted(model.conditions.values(), key=_condition_order):
        out.append("\n" + _condition(condition, source_comments))
    return "".join(out)
