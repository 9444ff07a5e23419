"""Expand: one level of the rewrite tree of ``object#relation`` as OpenFGA's UsersetTree.

Usersets and tuple-to-userset targets are named, not expanded (clients call Expand again).
Conditions are not evaluated; tuples the current model would not admit are left out.
The result is the protojson ``{"tree": {"root": Node}}`` dict.
"""

from __future__ import annotations

from typing import Any

from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.model import (
    ComputedUserset,
    Difference,
    Intersection,
    Rewrite,
    This,
    TupleToUserset,
    Union,
)
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import TupleReader, split_object
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["expand"]


def _node(request: RequestContext, rewrite: Rewrite, obj: str, relation: str) -> dict[str, Any]:
    name = f"{obj}#{relation}"
    match rewrite:
        case This():
            users = {k.user for k in request.reader.read(obj, relation) if request.valid(k)}
            return {"name": name, "leaf": {"users": {"users": sorted(users)}}}
        case ComputedUserset(computed):
            return {"name": name, "leaf": {"computed": {"userset": f"{obj}#{computed}"}}}
        case TupleToUserset(tupleset, computed):
            targets: list[str] = []
            for key in request.reader.read(obj, tupleset):
                target = f"{key.user}#{computed}"
                if (
                    request.valid(key)
                    and target not in targets
                    and request.ts.has_relation(split_object(key.user)[0], computed)
                ):
                    targets.append(target)
            return {
                "name": name,
                "leaf": {
                    "tupleToUserset": {
                        "tupleset": f"{obj}#{tupleset}",
                        "computed": [{"userset": t} for t in targets],
                    }
                },
            }
        case Union(children):
            return {
                "name": name,
                "union": {"nodes": [_node(request, c, obj, relation) for c in children]},
            }
        case Intersection(children):
            return {
                "name": name,
                "intersection": {"nodes": [_node(request, c, obj, relation) for c in children]},
            }
        case Difference(base, subtract):
            return {
                "name": name,
                "difference": {
                    "base": _node(request, base, obj, relation),
                    "subtract": _node(request, subtract, obj, relation),
                },
            }


def expand(
    ts: TypeSystem,
    store: TupleReader,
    obj: str,
    relation: str,
    options: RequestOptions | None = None,
) -> dict[str, Any]:
    """OpenFGA's Expand response for ``obj#relation``."""
    if not obj or not relation:
        raise FgaError(ErrorCode.INVALID_EXPAND_INPUT, "object and relation are required")
    problem = ts.object_problem(obj, relation)
    if problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, problem[1])
    request = RequestContext(ts, store, options or RequestOptions())
    definition = ts.relation(split_object(obj)[0], relation)
    assert definition is not None  # object_problem checked it
    return {"tree": {"root": _node(request, definition.rewrite, obj, relation)}}
