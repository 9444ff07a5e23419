"""Check: does ``user`` have ``relation`` on ``object``? OpenFGA's rewrite dispatch.

Evaluation walks the relation's rewrite tree. A hop through a userset tuple or a
tuple-to-userset tuple is a *dispatch*: it costs one depth (the 25th fails with 2002) and
carries the path's visited ``object#relation@user`` keys, so that a revisit answers
``False`` with the cycle flag. Computed relations and set operators are free. Outcomes
without an error or a cycle are memoised for the rest of the request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from core.fga import reducers
from core.fga.errors import ErrorCode, FgaError
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
from core.fga.result import ALLOWED, CYCLE, DENIED, Outcome
from core.fga.tuples import TupleKey, TupleReader, split_object, split_user
from core.fga.typesystem import TypeSystem

__all__ = ["Checker", "Resolver", "ResolverWrapper", "check"]


class Resolver(Protocol):
    """One sub-problem solver; caches and throttles wrap it with a delegate."""

    def resolve(self, obj: str, relation: str, user: str, depth: int,
                visited: frozenset[str]) -> Outcome: ...


ResolverWrapper = Callable[[Resolver], Resolver]


class Checker:
    """Evaluates Check sub-problems for one request (memo lives as long as the request)."""

    def __init__(self, request: RequestContext, wrap: ResolverWrapper | None = None) -> None:
        self.request = request
        self.ts = request.ts
        self._memo: dict[tuple[str, str, str], Outcome] = {}
        #: Where dispatched sub-problems go: this checker, or a wrapper (cache, throttle)
        #: whose delegate is this checker.
        self.dispatcher: Resolver = wrap(self) if wrap is not None else self

    # ------------------------------------------------------------ entry points

    def check(self, obj: str, relation: str, user: str) -> bool:
        """The answer, or :class:`FgaError` if evaluation failed."""
        outcome = self.dispatcher.resolve(obj, relation, user, 0, frozenset())
        if outcome.error is not None:
            raise outcome.error
        return outcome.allowed

    def resolve(self, obj: str, relation: str, user: str, depth: int,
                visited: frozenset[str]) -> Outcome:
        memo_key = (obj, relation, user)
        cached = self._memo.get(memo_key)
        if cached is not None:
            return cached
        step = f"{obj}#{relation}@{user}"
        if step in visited:
            return CYCLE
        outcome = self._resolve(obj, relation, user, depth, visited | {step})
        if outcome.error is None and not outcome.cycle:
            self._memo[memo_key] = outcome
        return outcome

    def _dispatch(self, obj: str, relation: str, user: str, depth: int,
                  visited: frozenset[str]) -> Outcome:
        if depth + 1 >= self.request.max_depth:
            return Outcome.failed(self.request.depth_exceeded())
        return self.dispatcher.resolve(obj, relation, user, depth + 1, visited)

    def _resolve(self, obj: str, relation: str, user: str, depth: int,
                 visited: frozenset[str]) -> Outcome:
        if user == f"{obj}#{relation}":
            return ALLOWED
        object_type = split_object(obj)[0]
        definition = self.ts.relation(object_type, relation)
        if definition is None:
            return Outcome.failed(FgaError(ErrorCode.RELATION_NOT_FOUND,
                                           f"relation '{object_type}#{relation}' not found"))
        return self._rewrite(definition.rewrite, obj, relation, user, depth, visited)

    # ------------------------------------------------------------ rewrite dispatch

    def _rewrite(self, rewrite: Rewrite, obj: str, relation: str, user: str, depth: int,
                 visited: frozenset[str]) -> Outcome:
        match rewrite:
            case This():
                return self._direct(obj, relation, user, depth, visited)
            case ComputedUserset(computed):
                return self.resolve(obj, computed, user, depth, visited)
            case TupleToUserset(tupleset, computed):
                return self._tuple_to_userset(obj, tupleset, computed, user, depth, visited)
            case Union(children):
                return reducers.union(
                    lambda c=c: self._rewrite(c, obj, relation, user, depth, visited)  # type: ignore[misc]
                    for c in children)
            case Intersection(children):
                return reducers.intersection(
                    lambda c=c: self._rewrite(c, obj, relation, user, depth, visited)  # type: ignore[misc]
                    for c in children)
            case Difference(base, subtract):
                return reducers.difference(
                    lambda: self._rewrite(base, obj, relation, user, depth, visited),
                    lambda: self._rewrite(subtract, obj, relation, user, depth, visited))

    def _passing(self, keys: list[TupleKey]) -> tuple[list[TupleKey], FgaError | None]:
        """Tuples valid under the model whose condition holds, and the first deferred error."""
        passing: list[TupleKey] = []
        error: FgaError | None = None
        for key in keys:
            if not self.request.valid(key):
                continue
            try:
                if self.request.condition_holds(key):
                    passing.append(key)
            except FgaError as exc:
                error = error or exc
        return passing, error

    def _direct(self, obj: str, relation: str, user: str, depth: int,
                visited: frozenset[str]) -> Outcome:
        refs = self.ts.directly_related(split_object(obj)[0], relation)
        user_type, user_id, user_relation = split_user(user)
        reader = self.request.reader
        exact_ok = wildcard_ok = userset_ok = False
        for ref in refs:
            if ref.relation is not None:
                userset_ok = True
            if ref.type != user_type:
                continue
            if user_relation:
                exact_ok = exact_ok or ref.relation == user_relation
            elif user_id == "*":
                exact_ok = exact_ok or ref.wildcard
            elif ref.wildcard:
                wildcard_ok = True
            elif ref.relation is None:
                exact_ok = True

        def probe(target: str) -> Outcome:
            found = list(reader.read_exact(obj, relation, target))
            if not found:
                return DENIED
            passing, error = self._passing(found)
            if passing:
                return ALLOWED
            return Outcome.failed(error) if error is not None else DENIED

        def usersets() -> Iterator[reducers.Thunk]:
            passing, error = self._passing(list(reader.read_usersets(obj, relation)))
            for key in passing:
                set_type, set_id, set_relation = split_user(key.user)
                set_object = f"{set_type}:{set_id}"
                yield lambda o=set_object, r=set_relation: self._dispatch(  # type: ignore[misc]
                    o, r, user, depth, visited)
            if error is not None:
                yield lambda: Outcome.failed(error)

        def probes() -> Iterator[reducers.Thunk]:
            if exact_ok:
                yield lambda: probe(user)
            if wildcard_ok:
                yield lambda: probe(f"{user_type}:*")
            if userset_ok:
                yield from usersets()

        return reducers.union(probes())

    def _tuple_to_userset(self, obj: str, tupleset: str, computed: str, user: str, depth: int,
                          visited: frozenset[str]) -> Outcome:
        passing, error = self._passing(list(self.request.reader.read(obj, tupleset)))

        def parents() -> Iterator[reducers.Thunk]:
            for key in passing:
                parent_type = split_object(key.user)[0]
                if self.ts.has_relation(parent_type, computed):
                    yield lambda p=key.user: self._dispatch(  # type: ignore[misc]
                        p, computed, user, depth, visited)
            if error is not None:
                yield lambda: Outcome.failed(error)

        return reducers.union(parents())


def validate_check_request(ts: TypeSystem, obj: str, relation: str, user: str) -> None:
    """OpenFGA's loose validation of Check's tuple key: every problem is 2000."""
    problem = ts.object_problem(obj, relation)
    if problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, problem[1])
    user_problem = ts.user_problem(user)
    if user_problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, user_problem)


def check(ts: TypeSystem, store: TupleReader, obj: str, relation: str, user: str,
          options: RequestOptions | None = None, *, wrap: ResolverWrapper | None = None) -> bool:
    """Check one tuple against the model and the store (plus contextual tuples).

    ``wrap`` decorates the resolver that dispatched sub-problems go through, e.g.
    :meth:`core.fga.cache.CheckCache.wrapper`.
    """
    options = options or RequestOptions()
    validate_check_request(ts, obj, relation, user)
    _reject_bad_context(options.context)
    request = RequestContext(ts, store, options)
    return Checker(request, wrap).check(obj, relation, user)


def _reject_bad_context(context: Mapping[str, object]) -> None:
    if not isinstance(context, Mapping):
        raise FgaError(ErrorCode.VALIDATION_ERROR, "context must be an object")
