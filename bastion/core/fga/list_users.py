"""ListUsers: the users of one filter type that have ``relation`` on ``object``.

A port of OpenFGA's forward expansion, its set algebra and bookkeeping included, so the
lists agree with the real engine even where they disagree with its Check (OpenFGA does
not confirm ListUsers results with Check). When the model has no pruned path from the
filter to the relation (:mod:`core.fga.edges`) the answer is empty at once. Every
expanded ``object#relation`` counts against the depth limit (computed relations too) and
is remembered on its path: a revisit is a cycle and lists nothing.

An expansion sends messages: a user, whether it has the relationship, and the users the
message says are excluded. Direct tuples list users of the filter type (its relation is
not compared: OpenFGA's quirk) and expand usersets; an ``object#relation`` matching a
``type#relation`` filter lists itself. A union lists what any operand lists with a
relationship. An intersection lists a user every operand lists or admits through
``type:*``, unless some operand's message excluded it. An exclusion drops the base users
its subtract lists (all of them when it lists ``type:*``) and passes the others on as the
base had them; when the base lists ``type:*`` it keeps that, and the users the subtract
lists are passed on with the opposite status, once per base user, marked excluded when
they had the relationship there; so an exclusion further up turns them back into
results (``a but not (b but not c)``). A union keeps a user excluded only when exactly
as many messages excluded it as it has operands. An exclusion whose subtract came back
to a userset being expanded lists nothing and drops its errors; any other error fails
the request. Where OpenFGA merges statuses in a racy order (several parents or usersets
feeding one list), a user listed with a relationship keeps it.

Bounds, as OpenFGA's: at most ``max_results`` users (0: no bound), and a ``deadline``.
The set algebra needs whole operands, so an expansion cut short by the deadline cannot
say who it lists; the answer is then the users it had met so far that Check confirms
(``timed_out``), never a user it would not grant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bastion.core.fga.check import Checker
from bastion.core.fga.edges import has_possible_edges
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.list_objects import ListResult
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
from bastion.core.fga.tuples import TupleKey, TupleReader, split_object, split_user
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["UserFilter", "list_users"]


@dataclass(frozen=True, slots=True)
class UserFilter:
    type: str
    relation: str = ""

    @classmethod
    def parse(cls, text: str) -> UserFilter:
        type_name, _, relation = text.partition("#")
        return cls(type_name, relation)


@dataclass(frozen=True, slots=True)
class _Found:
    """One message of OpenFGA's expansion: a user, its status, the users it says excluded."""

    user: str
    has: bool = True
    excluded: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Expansion:
    """The messages one expansion sent, in order; duplicates count (unions count them)."""

    found: list[_Found] = field(default_factory=list)
    #: it came back to a userset being expanded (only direct and computed pass this on)
    cycle: bool = False
    error: FgaError | None = None

    def absorb(self, other: _Expansion) -> None:
        """Another expansion feeding the same list (its cycle flag is not taken)."""
        self.found.extend(other.found)
        self.fail(other.error)

    def fail(self, error: FgaError | None) -> None:
        self.error = self.error or error

    def listed(self) -> set[str]:
        return {f.user for f in self.found if f.has}

    def statuses(self) -> dict[str, bool]:
        """User -> status; where OpenFGA's last-message-wins races, "has" wins."""
        out: dict[str, bool] = {}
        for f in self.found:
            out[f.user] = out.get(f.user, False) or f.has
        return out


class _OutOfTime(Exception):
    """The deadline passed during the expansion."""


class _Expander:
    def __init__(self, request: RequestContext, user_filter: UserFilter) -> None:
        self.request = request
        self.ts = request.ts
        self.filter = user_filter
        self.wildcard = f"{user_filter.type}:*"
        #: Every user a message named so far, in order: the candidates if time runs out.
        self.met: dict[str, None] = {}

    def expand(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> _Expansion:
        if self.request.out_of_time():
            raise _OutOfTime()
        if depth >= self.request.max_depth:
            return _Expansion(error=self.request.depth_exceeded())
        step = f"{obj}#{relation}"
        if step in visited:
            return _Expansion(cycle=True)
        visited = visited | {step}
        object_type = split_object(obj)[0]
        definition = self.ts.relation(object_type, relation)
        result = (
            _Expansion()
            if definition is None
            else self._rewrite(definition.rewrite, obj, relation, depth + 1, visited)
        )
        if object_type == self.filter.type and relation == self.filter.relation:
            result.found.append(_Found(step))
            self.met[step] = None
        return result

    def _rewrite(
        self, rewrite: Rewrite, obj: str, relation: str, depth: int, visited: frozenset[str]
    ) -> _Expansion:
        match rewrite:
            case This():
                return self._direct(obj, relation, depth, visited)
            case ComputedUserset(computed):
                return self.expand(obj, computed, depth, visited)
            case TupleToUserset(tupleset, computed):
                out = _Expansion()
                keys, error = self._passing(obj, tupleset)
                out.fail(error)
                for key in keys:
                    out.absorb(self.expand(key.user, computed, depth, visited))
                return out
            case Union(children):
                return self._union(
                    [self._rewrite(c, obj, relation, depth, visited) for c in children]
                )
            case Intersection(children):
                return self._intersection(
                    [self._rewrite(c, obj, relation, depth, visited) for c in children]
                )
            case Difference(base, subtract):
                base_part = self._rewrite(base, obj, relation, depth, visited)
                subtract_part = self._rewrite(subtract, obj, relation, depth, visited)
                if subtract_part.cycle:  # OpenFGA gives up on the exclusion, errors too
                    return _Expansion()
                out = _Expansion(
                    found=self._exclude(base_part.statuses(), subtract_part.statuses())
                )
                out.fail(base_part.error)
                out.fail(subtract_part.error)
                return out

    def _passing(self, obj: str, relation: str) -> tuple[list[TupleKey], FgaError | None]:
        """Tuples valid under the model whose condition holds, and the first condition error."""
        passing: list[TupleKey] = []
        error: FgaError | None = None
        for key in self.request.reader.read(obj, relation):
            if not self.request.valid(key):
                continue
            try:
                if self.request.condition_holds(key):
                    passing.append(key)
            except FgaError as exc:
                error = error or exc
        return passing, error

    def _direct(self, obj: str, relation: str, depth: int, visited: frozenset[str]) -> _Expansion:
        out = _Expansion()
        keys, error = self._passing(obj, relation)
        out.fail(error)
        for key in keys:
            user_type, user_id, user_relation = split_user(key.user)
            if not user_relation:
                if user_type == self.filter.type:
                    out.found.append(_Found(key.user))
                    self.met[key.user] = None
                continue
            hop = self.expand(f"{user_type}:{user_id}", user_relation, depth, visited)
            out.absorb(hop)
            out.cycle = out.cycle or hop.cycle
        return out

    @staticmethod
    def _union(parts: list[_Expansion]) -> _Expansion:
        """Users any operand lists; excluded: users named by exactly one message per operand.

        OpenFGA counts the messages naming a user excluded and keeps it when the count
        equals the number of operands (so one operand sending it twice also counts).
        """
        counts: dict[str, int] = {}
        for part in parts:
            for found in part.found:
                for user in found.excluded:
                    counts[user] = counts.get(user, 0) + 1
        excluded = frozenset(u for u, n in counts.items() if n == len(parts))
        listed: dict[str, None] = {}
        out = _Expansion()
        for part in parts:
            out.fail(part.error)
            listed.update(dict.fromkeys(f.user for f in part.found if f.has))
        out.found = [_Found(user, True, excluded) for user in listed]
        return out

    def _intersection(self, parts: list[_Expansion]) -> _Expansion:
        """Users every operand lists or admits with ``type:*``, minus any operand's excluded."""
        excluded = frozenset(u for part in parts for f in part.found for u in f.excluded)
        sets = [part.listed() for part in parts]
        with_wildcard = [self.wildcard in s for s in sets]
        out = _Expansion()
        for part in parts:
            out.fail(part.error)
        for user in sorted(set.union(*sets) - excluded):
            if (
                all(with_wildcard)
                if user == self.wildcard
                else all(user in s or w for s, w in zip(sets, with_wildcard, strict=True))
            ):
                out.found.append(_Found(user, True, excluded))
        return out

    def _exclude(self, base: dict[str, bool], subtract: dict[str, bool]) -> list[_Found]:
        """OpenFGA's exclusion over listed users, with its "no relationship" markers.

        A base user is dropped (passed on negated) when the subtract lists it or lists
        ``type:*``, else passed on as the base had it. When the base lists ``type:*``,
        every user the subtract lists is passed on with the opposite status, once per base
        user, and excluded when it had the relationship there.
        """
        out: list[_Found] = []
        subtract_wildcard = self.wildcard in subtract
        if self.wildcard in base:
            for user, has in base.items():
                if user not in subtract:
                    out.append(_Found(user, has and not subtract_wildcard))
                for other, has in subtract.items():
                    if split_user(other)[1] != "*":
                        out.append(
                            _Found(other, not has, frozenset({other}) if has else frozenset())
                        )
            return out
        for user, has in base.items():
            if user in subtract:
                out.append(_Found(user, not subtract[user]))
            elif subtract_wildcard:
                out.append(_Found(user, False))
            else:
                out.append(_Found(user, has))
        return out


def _validate(ts: TypeSystem, obj: str, relation: str, user_filter: UserFilter) -> None:
    object_type = split_object(obj)[0]
    if object_type not in ts.types:
        raise FgaError(ErrorCode.TYPE_NOT_FOUND, f"type '{object_type}' not found")
    if not ts.has_relation(object_type, relation):
        raise FgaError(
            ErrorCode.RELATION_NOT_FOUND, f"relation '{object_type}#{relation}' not found"
        )
    if user_filter.type not in ts.types:
        raise FgaError(ErrorCode.TYPE_NOT_FOUND, f"type '{user_filter.type}' not found")
    if user_filter.relation and not ts.has_relation(user_filter.type, user_filter.relation):
        raise FgaError(
            ErrorCode.RELATION_NOT_FOUND,
            f"relation '{user_filter.type}#{user_filter.relation}' not found",
        )


def list_users(
    ts: TypeSystem,
    store: TupleReader,
    obj: str,
    relation: str,
    user_filter: UserFilter,
    options: RequestOptions | None = None,
) -> ListResult:
    options = options or RequestOptions()
    _validate(ts, obj, relation, user_filter)
    request = RequestContext(ts, store, options)
    object_type = split_object(obj)[0]
    is_filter_itself = (object_type, relation) == (user_filter.type, user_filter.relation)
    expander = _Expander(request, user_filter)
    try:
        if not is_filter_itself and not has_possible_edges(
            ts, user_filter.type, user_filter.relation, object_type, relation
        ):
            return ListResult(())
        expansion = expander.expand(obj, relation, 0, frozenset())
    except _OutOfTime:
        return _confirmed(request, obj, relation, list(expander.met), options.max_results)
    except RecursionError:
        # a chain of hundreds of computed relations (they cost no depth): OpenFGA's error
        raise request.depth_exceeded() from None
    if expansion.error is not None:
        raise expansion.error
    users = sorted(expansion.listed())
    if options.max_results and len(users) > options.max_results:
        return ListResult(tuple(users[: options.max_results]), truncated=True)
    return ListResult(tuple(users))


def _confirmed(
    request: RequestContext, obj: str, relation: str, met: list[str], bound: int
) -> ListResult:
    """After the deadline: the users met so far that Check grants, at most ``bound``."""
    checker = Checker(request)
    granted: list[str] = []
    for user in met:
        if bound and len(granted) == bound:
            break
        try:
            if checker.check(obj, relation, user):
                granted.append(user)
        except FgaError:
            continue
    return ListResult(tuple(sorted(granted)), truncated=True, timed_out=True)
