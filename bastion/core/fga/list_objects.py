"""ListObjects: every object of a type on which ``user`` has ``relation``.

Reverse expansion from the user over :class:`ReverseGraph` collects candidate objects
(reading tuples by user, so the cost follows what the user can reach; over a store read
on demand the walk goes on from round to round, :mod:`core.fga.reverse_walk`), then each candidate
is confirmed with Check in one shared request, so the answer agrees with Check exactly.
Walk and checks are interleaved (:class:`ObjectSearch`): each object is confirmed as soon
as the walk reaches it, so a stream (OpenFGA's StreamedListObjects) sends it at once.

As OpenFGA does, a candidate needs no Check when the walk is exact for it: every relation
that can lead to the listed one is a union of direct, computed and tuple-to-userset parts
(no intersection or exclusion, which the walk over-approximates), the model has no
conditions, the user is an object (not a userset or a wildcard), and the walk reached the
candidate in fewer steps (tuples and computed relations) than Check's depth limit, less a
margin (a path Check would find before its limit, or before a chain of computed relations
runs out of stack: OpenFGA's depth error either way). Then the walk's path is the proof
Check would find, and a search that reads thousands of documents does not read each one
again to confirm it.

Bounds, as OpenFGA's: at most ``max_results`` objects (``truncated`` says more exist;
0 for no bound), and a ``deadline`` after which the answer is what was confirmed by then,
with no error (``timed_out``, and ``truncated``, say so).

As OpenFGA's reverse expansion does, the walk only follows tuples on relations that can
lead to the listed one, and evaluates the condition of every tuple it follows: one that
does not hold is not followed, one that cannot be evaluated (a missing parameter) fails
the whole request, even when the user reaches the object another way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bastion.core.fga.check import Checker
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.reverse_walk import ReverseWalk
from bastion.core.fga.tuples import TupleReader, split_user
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["EXACT_MARGIN", "ListResult", "ObjectSearch", "list_objects"]

#: Check's depth limit less this many steps bounds the paths the walk's exactness relies on.
EXACT_MARGIN = 3


@dataclass(frozen=True, slots=True)
class ListResult:
    items: tuple[str, ...]
    #: More may exist: the result bound was reached, or the deadline.
    truncated: bool = False
    #: The deadline passed before the evaluation was complete.
    timed_out: bool = False


def _validate(ts: TypeSystem, object_type: str, relation: str, user: str) -> None:
    if object_type not in ts.types:
        raise FgaError(ErrorCode.TYPE_NOT_FOUND, f"type '{object_type}' not found")
    if not ts.has_relation(object_type, relation):
        raise FgaError(
            ErrorCode.RELATION_NOT_FOUND, f"relation '{object_type}#{relation}' not found"
        )
    problem = ts.user_problem(user)
    if problem is not None:
        raise FgaError(ErrorCode.VALIDATION_ERROR, problem)


class ObjectSearch:
    """Iterating yields the objects on which ``user`` has ``relation``, each confirmed by
    Check, as they are found, until the walk ends or the deadline passes (then
    ``timed_out``). Validation errors are raised at once; a depth error as it happens;
    condition errors are kept in ``error`` (the caller decides, by what it found)."""

    def __init__(
        self,
        ts: TypeSystem,
        store: TupleReader,
        object_type: str,
        relation: str,
        user: str,
        options: RequestOptions | None = None,
        graph: ReverseGraph | None = None,
    ) -> None:
        _validate(ts, object_type, relation, user)
        self._request = RequestContext(ts, store, options or RequestOptions())
        self._graph = graph or ReverseGraph.build(ts)
        self._target = (object_type, relation, user)
        self.timed_out = False
        self.error: FgaError | None = None

    def _exact_hops(self) -> int:
        """The steps of the walk's path within which a candidate needs no Check (see the
        module docstring); -1 where every candidate needs one."""
        request = self._request
        object_type, relation, user = self._target
        _, user_id, user_relation = split_user(user)
        if (
            user_relation
            or user_id == "*"
            or request.ts.model.conditions
            or not self._graph.exact(object_type, relation)
        ):
            return -1
        return request.max_depth - EXACT_MARGIN

    def _out_of_time(self) -> bool:
        if self._request.out_of_time():
            self.timed_out = True
        return self.timed_out

    def __iter__(self) -> Iterator[str]:
        object_type, relation, user = self._target
        checker = Checker(self._request)
        request = self._request
        walk = ReverseWalk.for_request(request, self._graph, object_type, relation, user)
        candidates = walk.run(request, self._out_of_time)
        exact_within = self._exact_hops()
        for candidate, hops in candidates:
            if hops <= exact_within:
                yield candidate
                if self._out_of_time():
                    return
                continue
            try:
                ok = checker.check(candidate, relation, user)
            except FgaError as exc:
                if exc.fga_code == ErrorCode.RESOLUTION_TOO_COMPLEX:
                    raise
                self.error = self.error or exc
                continue
            if ok:
                yield candidate
            if self._out_of_time():
                return


def list_objects(
    ts: TypeSystem,
    store: TupleReader,
    object_type: str,
    relation: str,
    user: str,
    options: RequestOptions | None = None,
    graph: ReverseGraph | None = None,
) -> ListResult:
    """At most ``max_results`` objects, sorted; a condition error fails the request
    unless the bound was reached (or the deadline passed) all the same."""
    options = options or RequestOptions()
    search = ObjectSearch(ts, store, object_type, relation, user, options, graph)
    bound = options.max_results
    allowed: list[str] = []
    for obj in search:
        if bound and len(allowed) == bound:
            return ListResult(tuple(sorted(allowed)), truncated=True)
        allowed.append(obj)
    if search.timed_out:
        return ListResult(tuple(sorted(allowed)), truncated=True, timed_out=True)
    if search.error is not None and (not bound or len(allowed) < bound):
        raise search.error
    return ListResult(tuple(sorted(allowed)))
