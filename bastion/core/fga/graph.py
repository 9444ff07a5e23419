"""Reverse edges of a model, for walking from a user towards the objects it can reach.

For ``type#relation`` we keep the relations of the same type that mention it
(``computed``), the ``(parent type, parent relation, tupleset)`` triples whose
``X from tupleset`` names it (``ttu``), and the relations whose type restrictions admit it
as a userset (``usersets``). As in OpenFGA's reverse expansion, of an intersection only the
first operand is followed and of an exclusion only the base: an object must satisfy those
anyway, so the candidates stay a superset. ListObjects follows these edges to
over-approximate its candidates, then confirms each with Check; :meth:`leading_to` says
which relations can lead to the one it lists at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bastion.core.fga.model import (
    ComputedUserset,
    Difference,
    Intersection,
    Rewrite,
    TupleToUserset,
    Union,
)
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["ReverseGraph"]


@dataclass
class ReverseGraph:
    computed: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    ttu: dict[tuple[str, str], set[tuple[str, str, str]]] = field(default_factory=dict)
    usersets: dict[tuple[str, str], set[tuple[str, str]]] = field(default_factory=dict)
    #: Relations with an intersection or an exclusion: the walk over-approximates them.
    narrowed: set[tuple[str, str]] = field(default_factory=set)
    _leading: dict[tuple[str, str], frozenset[tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def build(cls, ts: TypeSystem) -> ReverseGraph:
        graph = cls()
        for typedef in ts.model.type_definitions:
            for name, relation in typedef.relations.items():
                targets, ttus = _followed(relation.rewrite)
                if _narrows(relation.rewrite):
                    graph.narrowed.add((typedef.name, name))
                for target in targets:
                    graph.computed.setdefault((typedef.name, target), set()).add(name)
                for ref in relation.directly_related:
                    if ref.relation is not None:
                        graph.usersets.setdefault((ref.type, ref.relation), set()).add(
                            (typedef.name, name)
                        )
                for tupleset, computed in ttus:
                    for ref in ts.directly_related(typedef.name, tupleset):
                        graph.ttu.setdefault((ref.type, computed), set()).add(
                            (typedef.name, name, tupleset)
                        )
        return graph

    def exact(self, object_type: str, relation: str) -> bool:
        """Whether no relation leading to ``object_type#relation`` has an intersection or
        an exclusion: the walk towards it then reaches exactly the objects Check allows."""
        return not self.narrowed & self.leading_to(object_type, relation)

    def leading_to(self, object_type: str, relation: str) -> frozenset[tuple[str, str]]:
        """Every ``(type, relation)`` from which these edges reach the target (itself too)."""
        target = (object_type, relation)
        found = self._leading.get(target)
        if found is None:
            backwards: dict[tuple[str, str], set[tuple[str, str]]] = {}
            for (type_name, part), names in self.computed.items():
                for name in names:
                    backwards.setdefault((type_name, name), set()).add((type_name, part))
            for child, parents in self.ttu.items():
                for parent_type, parent_relation, _ in parents:
                    backwards.setdefault((parent_type, parent_relation), set()).add(child)
            for member, holders in self.usersets.items():
                for holder in holders:
                    backwards.setdefault(holder, set()).add(member)
            reached = {target}
            pending = [target]
            while pending:
                for source in backwards.get(pending.pop(), ()):
                    if source not in reached:
                        reached.add(source)
                        pending.append(source)
            found = self._leading[target] = frozenset(reached)
        return found


def _narrows(rewrite: Rewrite) -> bool:
    match rewrite:
        case Intersection() | Difference():
            return True
        case Union(children):
            return any(_narrows(child) for child in children)
        case _:
            return False


def _followed(rewrite: Rewrite) -> tuple[list[str], list[tuple[str, str]]]:
    """The computed relations and ``(tupleset, computed)`` pairs reverse expansion follows."""
    match rewrite:
        case ComputedUserset(computed):
            return [computed], []
        case TupleToUserset(tupleset, computed):
            return [], [(tupleset, computed)]
        case Union(children):
            targets: list[str] = []
            ttus: list[tuple[str, str]] = []
            for child in children:
                child_targets, child_ttus = _followed(child)
                targets += child_targets
                ttus += child_ttus
            return targets, ttus
        case Intersection(children):
            return _followed(children[0])
        case Difference(base, _):
            return _followed(base)
        case _:
            return [], []
