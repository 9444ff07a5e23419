"""The authorization model: typed rewrite trees, and the protojson shape in and out.

A model is parsed once (from DSL or JSON) into frozen dataclasses, then indexed by
:class:`core.fga.typesystem.TypeSystem`. ``model_from_json`` accepts both the snake_case
and lowerCamel spellings protojson produces; ``model_to_json`` emits what OpenFGA's DSL
transformer emits (``metadata: null`` for a type without relations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PARAM_TYPE_NAMES",
    "AuthorizationModel",
    "ComputedUserset",
    "Condition",
    "ConditionParam",
    "Difference",
    "Intersection",
    "ModelFormatError",
    "Relation",
    "RelationRef",
    "Rewrite",
    "SourceInfo",
    "This",
    "TupleToUserset",
    "TypeDefinition",
    "Union",
    "model_from_json",
    "model_to_json",
]

#: DSL parameter type name -> protobuf enum name.
PARAM_TYPE_NAMES: dict[str, str] = {
    "any": "TYPE_NAME_ANY",
    "bool": "TYPE_NAME_BOOL",
    "string": "TYPE_NAME_STRING",
    "int": "TYPE_NAME_INT",
    "uint": "TYPE_NAME_UINT",
    "double": "TYPE_NAME_DOUBLE",
    "duration": "TYPE_NAME_DURATION",
    "timestamp": "TYPE_NAME_TIMESTAMP",
    "ipaddress": "TYPE_NAME_IPADDRESS",
    "map": "TYPE_NAME_MAP",
    "list": "TYPE_NAME_LIST",
}


@dataclass(frozen=True, slots=True)
class This:
    """Direct assignment: tuples ``object#relation@user`` admitted by the type restrictions."""


@dataclass(frozen=True, slots=True)
class ComputedUserset:
    relation: str


@dataclass(frozen=True, slots=True)
class TupleToUserset:
    tupleset: str
    computed: str


@dataclass(frozen=True, slots=True)
class Union:
    children: tuple[Rewrite, ...]


@dataclass(frozen=True, slots=True)
class Intersection:
    children: tuple[Rewrite, ...]


@dataclass(frozen=True, slots=True)
class Difference:
    base: Rewrite
    subtract: Rewrite


Rewrite = This | ComputedUserset | TupleToUserset | Union | Intersection | Difference


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """Where a modular (schema 1.2) definition came from."""

    module: str
    file: str


@dataclass(frozen=True, slots=True)
class RelationRef:
    """One type restriction: ``type``, ``type:*``, ``type#relation``, each maybe ``with cond``."""

    type: str
    relation: str | None = None
    wildcard: bool = False
    condition: str = ""

    def __str__(self) -> str:
        text = self.type
        if self.wildcard:
            text += ":*"
        elif self.relation is not None:
            text += "#" + self.relation
        if self.condition:
            text += " with " + self.condition
        return text


@dataclass(frozen=True, slots=True)
class Relation:
    name: str
    rewrite: Rewrite
    directly_related: tuple[RelationRef, ...] = ()
    source: SourceInfo | None = None


@dataclass(frozen=True, slots=True)
class TypeDefinition:
    name: str
    relations: Mapping[str, Relation] = field(default_factory=dict)
    source: SourceInfo | None = None


@dataclass(frozen=True, slots=True)
class ConditionParam:
    type_name: str  # protobuf enum name, e.g. TYPE_NAME_INT
    generic: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Condition:
    name: str
    expression: str
    parameters: Mapping[str, ConditionParam] = field(default_factory=dict)
    source: SourceInfo | None = None


@dataclass(frozen=True, slots=True)
class AuthorizationModel:
    schema_version: str
    type_definitions: tuple[TypeDefinition, ...]
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    id: str = ""


# ---------------------------------------------------------------- JSON -> model


class ModelFormatError(ValueError):
    """A JSON model whose shape is not an AuthorizationModel."""


def _get(obj: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in obj and obj[name] is not None:
            return obj[name]
    return None


def _object_relation(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        raise ModelFormatError("expected an ObjectRelation object")
    relation = obj.get("relation") or ""
    if not isinstance(relation, str):
        raise ModelFormatError("relation must be a string")
    return relation


def rewrite_from_json(obj: Any) -> Rewrite:
    if not isinstance(obj, Mapping):
        raise ModelFormatError("a userset rewrite must be an object")
    if _get(obj, "this") is not None:
        return This()
    computed = _get(obj, "computedUserset", "computed_userset")
    if computed is not None:
        return ComputedUserset(_object_relation(computed))
    ttu = _get(obj, "tupleToUserset", "tuple_to_userset")
    if ttu is not None:
        return TupleToUserset(
            _object_relation(_get(ttu, "tupleset") or {}),
            _object_relation(_get(ttu, "computedUserset", "computed_userset") or {}),
        )
    for key, kind in (("union", Union), ("intersection", Intersection)):
        node = _get(obj, key)
        if node is not None:
            children = _get(node, "child") or []
            return kind(tuple(rewrite_from_json(child) for child in children))
    difference = _get(obj, "difference")
    if difference is not None:
        return Difference(
            rewrite_from_json(_get(difference, "base") or {}),
            rewrite_from_json(_get(difference, "subtract") or {}),
        )
    raise ModelFormatError(
        "a userset rewrite must set one of this, computedUserset, "
        "tupleToUserset, union, intersection, difference"
    )


def _source_from_json(meta: Any) -> SourceInfo | None:
    if not isinstance(meta, Mapping):
        return None
    module = meta.get("module") or ""
    info = _get(meta, "source_info", "sourceInfo") or {}
    file = info.get("file") or "" if isinstance(info, Mapping) else ""
    if not module and not file:
        return None
    return SourceInfo(str(module), str(file))


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` when it is an object (absent: empty), else :class:`ModelFormatError`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelFormatError(f"{where} must be an object")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    """``value`` when it is a list (absent: empty), else :class:`ModelFormatError`."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ModelFormatError(f"{where} must be a list")
    return list(value)


def _ref_from_json(obj: Mapping[str, Any]) -> RelationRef:
    return RelationRef(
        type=str(obj.get("type") or ""),
        relation=obj.get("relation") or None,
        wildcard=obj.get("wildcard") is not None,
        condition=str(obj.get("condition") or ""),
    )


def _type_from_json(obj: Mapping[str, Any], where: str) -> TypeDefinition:
    metadata = obj.get("metadata") or {}
    relation_meta = (metadata.get("relations") or {}) if isinstance(metadata, Mapping) else {}
    relation_meta = _mapping(relation_meta, f"{where}.metadata.relations")
    relations: dict[str, Relation] = {}
    for name, rewrite in _mapping(obj.get("relations"), f"{where}.relations").items():
        meta = _mapping(relation_meta.get(name), f"{where}.metadata.relations.{name}")
        refs = _sequence(
            _get(meta, "directly_related_user_types", "directlyRelatedUserTypes"),
            f"{where}.metadata.relations.{name}.directly_related_user_types",
        )
        relations[name] = Relation(
            name=name,
            rewrite=rewrite_from_json(rewrite),
            directly_related=tuple(
                _ref_from_json(_mapping(ref, f"{where}.metadata.relations.{name}[{i}]"))
                for i, ref in enumerate(refs)
            ),
            source=_source_from_json(meta),
        )
    return TypeDefinition(str(obj.get("type") or ""), relations, _source_from_json(metadata))


def _param_from_json(obj: Mapping[str, Any], where: str) -> ConditionParam:
    generics = _sequence(_get(obj, "generic_types", "genericTypes"), f"{where}.generic_types")
    return ConditionParam(
        str(_get(obj, "type_name", "typeName") or "TYPE_NAME_UNSPECIFIED"),
        tuple(
            str(_get(_mapping(g, f"{where}.generic_types[{i}]"), "type_name", "typeName"))
            for i, g in enumerate(generics)
        ),
    )


def model_from_json(obj: Mapping[str, Any]) -> AuthorizationModel:
    """Build a model from its protojson dict; :class:`ModelFormatError` (naming the field)
    if its shape is not a model's."""
    definitions = _sequence(_get(obj, "type_definitions", "typeDefinitions"), "type_definitions")
    types = tuple(
        _type_from_json(_mapping(t, f"type_definitions[{i}]"), f"type_definitions[{i}]")
        for i, t in enumerate(definitions)
    )
    conditions: dict[str, Condition] = {}
    for key, raw in _mapping(obj.get("conditions"), "conditions").items():
        cond = _mapping(raw, f"conditions.{key}")
        params = {
            name: _param_from_json(
                _mapping(p, f"conditions.{key}.parameters.{name}"),
                f"conditions.{key}.parameters.{name}",
            )
            for name, p in _mapping(cond.get("parameters"), f"conditions.{key}.parameters").items()
        }
        conditions[key] = Condition(
            name=str(cond.get("name") or ""),
            expression=str(cond.get("expression") or ""),
            parameters=params,
            source=_source_from_json(cond.get("metadata")),
        )
    return AuthorizationModel(
        schema_version=str(_get(obj, "schema_version", "schemaVersion") or ""),
        type_definitions=types,
        conditions=conditions,
        id=str(obj.get("id") or ""),
    )


# ---------------------------------------------------------------- model -> JSON


def rewrite_to_json(rewrite: Rewrite) -> dict[str, Any]:
    match rewrite:
        case This():
            return {"this": {}}
        case ComputedUserset(relation):
            return {"computedUserset": {"relation": relation}}
        case TupleToUserset(tupleset, computed):
            return {
                "tupleToUserset": {
                    "computedUserset": {"relation": computed},
                    "tupleset": {"relation": tupleset},
                }
            }
        case Union(children):
            return {"union": {"child": [rewrite_to_json(c) for c in children]}}
        case Intersection(children):
            return {"intersection": {"child": [rewrite_to_json(c) for c in children]}}
        case Difference(base, subtract):
            return {
                "difference": {"base": rewrite_to_json(base), "subtract": rewrite_to_json(subtract)}
            }


def _ref_to_json(ref: RelationRef) -> dict[str, Any]:
    out: dict[str, Any] = {"type": ref.type}
    if ref.wildcard:
        out["wildcard"] = {}
    elif ref.relation is not None:
        out["relation"] = ref.relation
    if ref.condition:
        out["condition"] = ref.condition
    return out


def _source_to_json(source: SourceInfo) -> dict[str, Any]:
    return {"module": source.module, "source_info": {"file": source.file}}


def model_to_json(model: AuthorizationModel) -> dict[str, Any]:
    types: list[dict[str, Any]] = []
    for typedef in model.type_definitions:
        out: dict[str, Any] = {
            "type": typedef.name,
            "relations": {
                name: rewrite_to_json(rel.rewrite) for name, rel in typedef.relations.items()
            },
        }
        metadata: dict[str, Any] | None = None
        if typedef.relations:
            relation_meta: dict[str, Any] = {}
            for name, rel in typedef.relations.items():
                entry: dict[str, Any] = {
                    "directly_related_user_types": [
                        _ref_to_json(ref) for ref in rel.directly_related
                    ]
                }
                if rel.source is not None:
                    entry.update(_source_to_json(rel.source))
                relation_meta[name] = entry
            metadata = {"relations": relation_meta}
        if typedef.source is not None:
            metadata = {**(metadata or {}), **_source_to_json(typedef.source)}
        out["metadata"] = metadata
        types.append(out)
    result: dict[str, Any] = {"schema_version": model.schema_version, "type_definitions": types}
    if model.id:
        result["id"] = model.id
    if model.conditions:
        conditions: dict[str, Any] = {}
        for key, cond in model.conditions.items():
            params: dict[str, Any] = {}
            for pname, param in cond.parameters.items():
                pjson: dict[str, Any] = {"type_name": param.type_name}
                if param.generic:
                    pjson["generic_types"] = [{"type_name": g} for g in param.generic]
                params[pname] = pjson
            entry = {"name": cond.name, "expression": cond.expression, "parameters": params}
            if cond.source is not None:
                entry["metadata"] = _source_to_json(cond.source)
            conditions[key] = entry
        result["conditions"] = conditions
    return result
