"""ListUsers: the users of one filter type that have ``relation`` on ``object``.

Forward expansion through the rewrite tree. Userset tuples are expanded recursively (one
depth per hop); a userset matching a ``type#relation`` filter is itself a result, and so is
the queried ``object#relation`` when it matches the filter. Set operators follow
OpenFGA's lossy wildcard rules: an intersection keeps concrete users that every branch
admits (a ``type:*`` branch admits them all) and keeps ``type:*`` only if every branch
has it; an exclusion removes the users its subtract lists and keeps a base ``type:*``
even if some users are subtracted (``[user:*] but not blocked`` lists ``user:*``).
Every result is then confirmed with Check; when no ``type:*`` survives, every other
matching user met during the expansion is checked too, so no user with access is lost to
the lossy algebra.
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
        #: every matching user met anywhere in the expansion, ``type:*`` aside
        self.seen: set[str] = set()

    def _matches(self, user: str) -> bool:
        user_type, user_id, user_relation = split_user(user)
        return user_type == self.filter.type and user_relation == self.filter.relation \
            and not (user_id == "*" and self.filter.relation)

    def _passing(self, keys: list[TupleKey]) -> list[TupleKey]:
        return [k for k in keys if self.request.valid(k) and self.request.condition_holds(k)]

    def expand(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> set[str]:
        step = f"{obj}#{relation}"
        if step in visited:
            return set()
        visited = visited | {step}
        found: set[str] = set()
        if self._matches(step):
            found.add(step)
            self.seen.add(step)
        definition = self.ts.relation(split_object(obj)[0], relation)
        if definition is None:
            return found
        return found | self._rewrite(definition.rewrite, obj, relation, depth, visited)

    def _hop(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> set[str]:
        if depth + 1 >= self.request.max_depth:
            raise self.request.depth_exceeded()
        return self.expand(obj, relation, depth + 1, visited)

    def _rewrite(self, rewrite: Rewrite, obj: str, relation: str, depth: int,
                 visited: frozenset[str]) -> set[str]:
        match rewrite:
            case This():
                return self._direct(obj, relation, depth, visited)
            case ComputedUserset(computed):
                return self.expand(obj, computed, depth, visited)
            case TupleToUserset(tupleset, computed):
                found: set[str] = set()
                for key in self._passing(list(self.request.reader.read(obj, tupleset))):
                    if self.ts.has_relation(split_object(key.user)[0], computed):
                        found |= self._hop(key.user, computed, depth, visited)
                return found
            case Union(children):
                out: set[str] = set()
                for child in children:
                    out |= self._rewrite(child, obj, relation, depth, visited)
                return out
            case Intersection(children):
                return self._intersect([self._rewrite(c, obj, relation, depth, visited)
                                        for c in children])
            case Difference(base, subtract):
                base_users = self._rewrite(base, obj, relation, depth, visited)
                if not base_users:
                    return base_users
                return base_users - self._rewrite(subtract, obj, relation, depth, visited)

    def _intersect(self, sets: list[set[str]]) -> set[str]:
        everyone = set.union(*sets)
        out: set[str] = set()
        for user in everyone:
            is_object = user != self.wildcard and "#" not in user
            if all(user in s or (is_object and self.wildcard in s) for s in sets):
                out.add(user)
        return out

    def _direct(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> set[str]:
        found: set[str] = set()
        for key in self._passing(list(self.request.reader.read(obj, relation))):
            user_type, user_id, user_relation = split_user(key.user)
            if self._matches(key.user) or (
                    user_id == "*" and user_type == self.filter.type and not self.filter.relation):
                found.add(key.user)
                if user_id != "*":
                    self.seen.add(key.user)
            if user_relation:
                found |= self._hop(f"{user_type}:{user_id}", user_relation, depth, visited)
        return found


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
    expanded = expander.expand(obj, relation, 0, frozenset())
    checker = Checker(request)
    found = {user for user in expanded if checker.check(obj, relation, user)}
    if expander.wildcard not in found:
        # Set algebra over wildcards is lossy: users it dropped are re-checked.
        found |= {u for u in expander.seen - expanded if checker.check(obj, relation, u)}
    users = sorted(found)
    if len(users) > options.max_results:
        return ListResult(tuple(users[:options.max_results]), truncated=True)
    return ListResult(tuple(users))
