"""Can a user of one type (or userset) ever reach ``type#relation``? A model-only answer.

OpenFGA's ListUsers asks its relationship graph for the *pruned* edges from the filter to
the queried relation first and answers an empty list when there are none, without reading
a tuple. Pruned means: of an intersection only the first operand is followed, of an
exclusion only the base. Each ``type#relation`` is explored once per question.
"""

from __future__ import annotations

from bastion.core.fga.model import (
    ComputedUserset,
    Difference,
    Intersection,
    RelationRef,
    Rewrite,
    This,
    TupleToUserset,
    Union,
)
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["has_possible_edges"]


def has_possible_edges(
    ts: TypeSystem, source_type: str, source_relation: str, target_type: str, target_relation: str
) -> bool:
    """Whether ``source_type[#source_relation]`` has a pruned path to the target relation."""
    return _EdgeSearch(ts, source_type, source_relation).relation(target_type, target_relation)


class _EdgeSearch:
    def __init__(self, ts: TypeSystem, source_type: str, source_relation: str) -> None:
        self.ts = ts
        self.source_type = source_type
        self.source_relation = source_relation
        self.visited: set[tuple[str, str]] = set()

    def relation(self, type_name: str, relation: str) -> bool:
        if (type_name, relation) in self.visited:
            return False
        self.visited.add((type_name, relation))
        definition = self.ts.relation(type_name, relation)
        return definition is not None and self._rewrite(type_name, relation, definition.rewrite)

    def _admits_source(self, ref: RelationRef) -> bool:
        """OpenFGA's IsDirectlyRelated or IsPubliclyAssignable for one type restriction."""
        if ref.type != self.source_type:
            return False
        if ref.wildcard:
            return True
        if self.source_relation:
            return ref.relation == self.source_relation
        return ref.relation is None

    def _rewrite(self, type_name: str, relation: str, rewrite: Rewrite) -> bool:
        match rewrite:
            case This():
                refs = self.ts.directly_related(type_name, relation)
                if any(self._admits_source(ref) for ref in refs):
                    return True
                return any(
                    self.relation(ref.type, ref.relation)
                    for ref in refs
                    if ref.relation is not None
                )
            case ComputedUserset(computed):
                if type_name == self.source_type and computed == self.source_relation:
                    return True
                return self.relation(type_name, computed)
            case TupleToUserset(tupleset, computed):
                return any(
                    self._through_parent(ref.type, computed)
                    for ref in self.ts.directly_related(type_name, tupleset)
                )
            case Union(children):
                return any(self._rewrite(type_name, relation, c) for c in children)
            case Intersection(children):
                return self._rewrite(type_name, relation, children[0])
            case Difference(base, _):
                return self._rewrite(type_name, relation, base)

    def _through_parent(self, parent_type: str, computed: str) -> bool:
        if not self.ts.has_relation(parent_type, computed):
            return False
        if parent_type == self.source_type and computed == self.source_relation:
            return True
        return self.relation(parent_type, computed)
