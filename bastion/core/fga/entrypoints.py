"""The OpenFGA server's entry-point search (``typesystem.NewAndValidate``), quirks included.

The server and the language validator agree on the rule (a relation must reach a concrete
type; a union needs one operand that does, an intersection or difference needs all) but
not on how the search remembers where it has been, so they can disagree on a model. The
server's record of visited relations is a map of per-type maps that is copied only one
level deep at each step, which has three visible effects, all reproduced here:

* every step of the same walk that visits a relation of a type already in the record
  writes into the *same* per-type map, so a relation seen in one operand of an
  intersection counts as visited in the next operand too;
* a visited relation reads as "has an entry point" only when it was reached through a
  plain or wildcard type restriction; every other visited relation reads as "has none",
  so a computed relation met a second time fails (and is reported as a loop);
* the operands of a set operation start from the record as it was before their parent
  relation was added, while a computed relation, a tuple-to-userset or a ``type#rel``
  restriction passes on the record that includes it.

The minimal model the difference shows on (the server rejects ``r5``, the language
validator accepts it): ``r2: r0 and r0x``, ``r3: r0 and r2``, ``r4: r3 and r2``,
``r5: r4 from parent``.
"""

from __future__ import annotations

from collections.abc import Mapping

from bastion.core.fga.model import (
    AuthorizationModel,
    ComputedUserset,
    Difference,
    Intersection,
    Relation,
    Rewrite,
    This,
    TupleToUserset,
    Union,
)

__all__ = ["first_entrypoint_error"]

# type -> relation -> "has an entry point"; the outer dict is copied, the inner ones shared.
_Visited = dict[str, dict[str, bool]]


class _Search:
    def __init__(self, relations: Mapping[str, Mapping[str, Relation]]) -> None:
        self.relations = relations

    def entry(
        self, type_name: str, relation: str, rewrite: Rewrite, outer: _Visited
    ) -> tuple[bool, bool]:
        """(has an entry point, the search came back to a computed relation)."""
        visited = dict(outer)
        if type_name in visited:
            visited[type_name][relation] = False  # the shared per-type map, on purpose
        else:
            visited[type_name] = {relation: False}
        match rewrite:
            case This():
                return self._direct(type_name, relation, visited), False
            case ComputedUserset(target):
                if target in visited[type_name]:
                    return visited[type_name][target], True
                return self.entry(
                    type_name, target, self.relations[type_name][target].rewrite, visited
                )
            case TupleToUserset(tupleset, computed):
                return self._tupleset(type_name, tupleset, computed, visited), False
            case Union(children):
                loop = False
                for child in children:
                    ok, child_loop = self.entry(type_name, relation, child, outer)
                    if ok:
                        return True, False
                    loop = loop or child_loop
                return False, loop
            case Intersection(children):
                return self._all(type_name, relation, children, outer)
            case Difference(base, subtract):
                return self._all(type_name, relation, (base, subtract), outer)

    def _all(
        self, type_name: str, relation: str, operands: tuple[Rewrite, ...], outer: _Visited
    ) -> tuple[bool, bool]:
        for operand in operands:
            ok, loop = self.entry(type_name, relation, operand, outer)
            if not ok:
                return False, loop
        return True, False

    def _direct(self, type_name: str, relation: str, visited: _Visited) -> bool:
        for ref in self.relations[type_name][relation].directly_related:
            if ref.relation is None or ref.wildcard:
                visited[type_name][relation] = True
                return True
            if ref.relation in visited.get(ref.type, {}):
                continue
            target = self.relations[ref.type][ref.relation]
            if self.entry(ref.type, ref.relation, target.rewrite, visited)[0]:
                return True
        return False

    def _tupleset(self, type_name: str, tupleset: str, computed: str, visited: _Visited) -> bool:
        for ref in self.relations[type_name][tupleset].directly_related:
            target = self.relations.get(ref.type, {}).get(computed)
            if target is None:
                continue
            seen = visited.get(ref.type, {}).get(computed)
            if seen is not None:
                if seen:
                    return True
                continue
            if self.entry(ref.type, computed, target.rewrite, visited)[0]:
                return True
        return False


def first_entrypoint_error(model: AuthorizationModel) -> str | None:
    """The server's message for the first relation without an entry point, or None.

    Types and relations are taken in sorted order, as the server does. The model must
    otherwise be valid (every referenced type and relation exists).
    """
    relations = {t.name: t.relations for t in model.type_definitions}
    search = _Search(relations)
    for type_name in sorted(relations):
        for name in sorted(relations[type_name]):
            ok, loop = search.entry(type_name, name, relations[type_name][name].rewrite, {})
            if not ok:
                cause = "potential loop" if loop else "no entrypoints defined"
                return (
                    f"the definition of relation '{name}' in object type '{type_name}' "
                    f"is invalid: {cause}"
                )
    return None
