"""Reverse edges of a model, for walking from a user towards the objects it can reach.

For ``type#relation`` we keep the relations of the same type that mention it outside a
``but not`` subtract (``computed``), and the ``(parent type, parent relation, tupleset)``
triples whose ``X from tupleset`` names it (``ttu``). ListObjects follows these edges to
over-approximate its candidates, then confirms each with Check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.fga.model import Difference, Rewrite, TupleToUserset
from core.fga.typesystem import TypeSystem, rewrite_children

__all__ = ["ReverseGraph"]


@dataclass
class ReverseGraph:
    computed: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    ttu: dict[tuple[str, str], set[tuple[str, str, str]]] = field(default_factory=dict)

    @classmethod
    def build(cls, ts: TypeSystem) -> ReverseGraph:
        graph = cls()
        for typedef in ts.model.type_definitions:
            for name, relation in typedef.relations.items():
                for target in ts.computed_targets(relation.rewrite):
                    graph.computed.setdefault((typedef.name, target), set()).add(name)
                for tupleset, computed in _ttus(relation.rewrite):
                    for ref in ts.directly_related(typedef.name, tupleset):
                        graph.ttu.setdefault((ref.type, computed), set()).add(
                            (typedef.name, name, tupleset)
                        )
        return graph


def _ttus(rewrite: Rewrite) -> list[tuple[str, str]]:
    if isinstance(rewrite, TupleToUserset):
        return [(rewrite.tupleset, rewrite.computed)]
    if isinstance(rewrite, Difference):
        return _ttus(rewrite.base)
    out: list[tuple[str, str]] = []
    for child in rewrite_children(rewrite):
        out.extend(_ttus(child))
    return out
