"""ListUsers: the users of one filter type that have ``relation`` on ``object``.

Forward expansion through the rewrite tree, with OpenFGA's own (lossy) set algebra so the
lists agree with it. Userset tuples are expanded recursively (one depth per hop); a
userset matching a ``type#relation`` filter is itself a result, and so is the queried
``object#relation`` when it matches the filter. A union lists what any operand lists. An
intersection lists a user every operand lists or admits with ``type:*``, and ``type:*``
only if every operand has it. An exclusion drops the base users its subtract lists, and
all of them if the subtract lists ``type:*``; when the base lists ``type:*`` it keeps it
and passes on the subtracted users marked "no relationship", which an exclusion further
up that subtracts this one turns back into results (``a but not (b but not c)``). An
exclusion whose subtract loops back to a userset being expanded lists nothing. Every
result is then confirmed with Check, which drops what the algebra over-approximates.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.fga.check import Checker
from core.fga.errors import ErrorCode, FgaError
from core.fga.list_objects import ListResult
from core.fga.model import (
    ComputedUserset,
    Difference,
    Intersection,
    Rewrite,
    This,
    TupleToUserset,
    Union,
)
from core.fga.request import RequestContext, RequestOptions
from core.fga.tuples import TupleKey, TupleReader, split_object, split_user
from core.fga.typesystem import TypeSystem

__all__ = ["UserFilter", "list_users"]

#: a listed user -> whether it has the relationship (False: listed as excluded only)
_Found = dict[str, bool]
#: the users found, and whether the expansion came back to a userset it was expanding
_Expansion = tuple[_Found, bool]


@dataclass(frozen=True, slots=True)
class UserFilter:
    type: str
    relation: str = ""

    @classmethod
    def parse(cls, text: str) -> UserFilter:
        type_name, _, relation = text.partition("#")
        return cls(type_name, relation)


class _Expander:
    def __init__(self, request: RequestContext, user_filter: UserFilter) -> None:
        self.request = request
        self.ts = request.ts
        self.filter = user_filter
        self.wildcard = f"{user_filter.type}:*"

    def _matches(self, user: str) -> bool:
        user_type, user_id, user_relation = split_user(user)
        return user_type == self.filter.type and user_relation == self.filter.relation \
            and not (user_id == "*" and self.filter.relation)

    def _passing(self, keys: list[TupleKey]) -> list[TupleKey]:
        return [k for k in keys if self.request.valid(k) and self.request.condition_holds(k)]

    def expand(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> _Expansion:
        step = f"{obj}#{relation}"
        if step in visited:
            return {}, True
        visited = visited | {step}
        found: _Found = {}
        if self._matches(step):
            found[step] = True
        definition = self.ts.relation(split_object(obj)[0], relation)
        if definition is None:
            return found, False
        more, cycle = self._rewrite(definition.rewrite, obj, relation, depth, visited)
        return _merge(found, more), cycle

    def _hop(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> _Expansion:
        if depth + 1 >= self.request.max_depth:
            raise self.request.depth_exceeded()
        return self.expand(obj, relation, depth + 1, visited)

    def _rewrite(self, rewrite: Rewrite, obj: str, relation: str, depth: int,
                 visited: frozenset[str]) -> _Expansion:
        match rewrite:
            case This():
                return self._direct(obj, relation, depth, visited)
            case ComputedUserset(computed):
                return self.expand(obj, computed, depth, visited)
            case TupleToUserset(tupleset, computed):
                found: _Found = {}
                for key in self._passing(list(self.request.reader.read(obj, tupleset))):
                    if self.ts.has_relation(split_object(key.user)[0], computed):
                        _merge(found, self._hop(key.user, computed, depth, visited)[0])
                return found, False
            case Union(children):
                out: _Found = {}
                for child in children:
                    out.update({u: True for u, has in
                                self._rewrite(child, obj, relation, depth, visited)[0].items()
                                if has})
                return out, False
            case Intersection(children):
                return self._intersect([
                    {u for u, has in self._rewrite(c, obj, relation, depth, visited)[0].items()
                     if has} for c in children]), False
            case Difference(base, subtract):
                base_users = self._rewrite(base, obj, relation, depth, visited)[0]
                subtracted, cycle = self._rewrite(subtract, obj, relation, depth, visited)
                if cycle:  # OpenFGA gives up on the whole exclusion
                    return {}, False
                return self._exclude(base_users, subtracted), False

    def _intersect(self, sets: list[set[str]]) -> _Found:
        """A user every operand lists, or lists ``type:*`` (usersets included)."""
        with_wildcard = [self.wildcard in s for s in sets]
        out: _Found = {}
        for user in set.union(*sets):
            if all(with_wildcard) if user == self.wildcard else all(
                    user in s or w for s, w in zip(sets, with_wildcard, strict=True)):
                out[user] = True
        return out

    def _exclude(self, base: _Found, subtract: _Found) -> _Found:
        """OpenFGA's exclusion over listed users, with its "no relationship" markers.

        A base user is dropped when the subtract lists it or lists ``type:*``. When the
        base lists ``type:*``, every user the subtract lists is passed on negated (so an
        exclusion further up, subtracting this one, lists it again).
        """
        out: _Found = {}
        subtract_wildcard = self.wildcard in subtract
        if self.wildcard in base:
            for user in base:
                if user not in subtract and not subtract_wildcard:
                    out[user] = True
                elif user not in subtract:
                    out.setdefault(user, False)
            for user, has in subtract.items():
                if split_user(user)[1] != "*":
                    _merge(out, {user: not has})
            return out
        for user, has in base.items():
            if user in subtract:
                out[user] = not subtract[user]
            elif subtract_wildcard:
                out[user] = False
            else:
                out[user] = has
        return out

    def _direct(self, obj: str, relation: str, depth: int,
                visited: frozenset[str]) -> _Expansion:
        found: _Found = {}
        cycle = False
        for key in self._passing(list(self.request.reader.read(obj, relation))):
            user_type, user_id, user_relation = split_user(key.user)
            if self._matches(key.user) or (
                    user_id == "*" and user_type == self.filter.type and not self.filter.relation):
                found[key.user] = True
            if user_relation:
                more, hop_cycle = self._hop(f"{user_type}:{user_id}", user_relation, depth,
                                            visited)
                _merge(found, more)
                cycle = cycle or hop_cycle
        return found, cycle


def _merge(into: _Found, more: _Found) -> _Found:
    """Results met on one path: a user listed with a relationship keeps it."""
    for user, has in more.items():
        into[user] = into.get(user, False) or has
    return into


def _validate(ts: TypeSystem, obj: str, relation: str, user_filter: UserFilter) -> None:
    object_type = split_object(obj)[0]
    if object_type not in ts.types:
        raise FgaError(ErrorCode.TYPE_NOT_FOUND, f"type '{object_type}' not found")
    if not ts.has_relation(object_type, relation):
        raise FgaError(ErrorCode.RELATION_NOT_FOUND,
                       f"relation '{object_type}#{relation}' not found")
    if user_filter.type not in ts.types:
        raise FgaError(ErrorCode.TYPE_NOT_FOUND, f"type '{user_filter.type}' not found")
    if user_filter.relation and not ts.has_relation(user_filter.type, user_filter.relation):
        raise FgaError(ErrorCode.RELATION_NOT_FOUND,
                       f"relation '{user_filter.type}#{user_filter.relation}' not found")


def list_users(ts: TypeSystem, store: TupleReader, obj: str, relation: str,
               user_filter: UserFilter, options: RequestOptions | None = None) -> ListResult:
    options = options or RequestOptions()
    _validate(ts, obj, relation, user_filter)
    request = RequestContext(ts, store, options)
    expander = _Expander(request, user_filter)
    expanded = {u for u, has in expander.expand(obj, relation, 0, frozenset())[0].items()
                if has}
    checker = Checker(request)
    found = {user for user in expanded if checker.check(obj, relation, user)}
    users = sorted(found)
    if len(users) > options.max_results:
        return ListResult(tuple(users[:options.max_results]), truncated=True)
    return ListResult(tuple(users))
