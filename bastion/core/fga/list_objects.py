"""ListObjects: every object of a type on which ``user`` has ``relation``.

Reverse expansion from the user over :class:`ReverseGraph` collects candidate objects
(reading tuples by user, so the cost follows what the user can reach), then each candidate
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

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from bastion.core.fga.check import Checker
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import TupleKey, TupleReader, split_object, split_user
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


def _walk(
    request: RequestContext,
    graph: ReverseGraph,
    object_type: str,
    relation: str,
    user: str,
    out_of_time: Callable[[], bool],
) -> Iterator[tuple[str, int]]:
    """Objects of ``object_type`` that may have ``relation`` for ``user`` (a superset),
    each once, as the walk reaches them, with the steps of the path that reached them
    (tuples and computed relations alike); it stops early once ``out_of_time()``."""
    ts, reader = request.ts, request.reader
    facts: set[tuple[str, str]] = set()
    subjects: deque[tuple[str, int]] = deque([(user, 0)])
    seen_subjects = {user}
    user_type, user_id, user_relation = split_user(user)
    if not user_relation and user_id != "*":
        subjects.append((f"{user_type}:*", 0))
    found: list[tuple[str, int]] = []
    leading = graph.leading_to(object_type, relation)
    #: By a subject's (type, relation): the types whose tuples the walk may follow from
    #: it, those with a relation leading to the target that admits it directly; the
    #: store is asked of those alone (every other tuple would fail ``follows``).
    admitting: dict[tuple[str, str], tuple[str, ...]] = {}

    def types_for(subject: str) -> tuple[str, ...]:
        subject_type, _, subject_relation = split_user(subject)
        form = (subject_type, subject_relation)
        types = admitting.get(form)
        if types is None:
            types = admitting[form] = tuple(
                type_name
                for type_name in ts.types
                if any(
                    ref.type == subject_type and (ref.relation or "") == subject_relation
                    for leading_type, rel in leading
                    if leading_type == type_name
                    for ref in ts.directly_related(type_name, rel)
                )
            )
        return types

    def follows(key: TupleKey, type_name: str, rel: str) -> bool:
        """Whether the walk takes ``key`` towards ``type_name#rel``; raises FgaError."""
        if (type_name, rel) not in leading or not request.valid(key):
            return False
        return request.condition_holds(key)

    def add_fact(obj: str, rel: str, hops: int) -> None:
        pending = [(obj, rel, hops)]
        while pending:
            fact_obj, fact_rel, hops = pending.pop()
            fact = (fact_obj, fact_rel)
            if fact in facts:
                continue
            facts.add(fact)
            fact_type = split_object(fact_obj)[0]
            if fact_type == object_type and fact_rel == relation:
                found.append((fact_obj, hops))
            subject = f"{fact_obj}#{fact_rel}"
            if subject not in seen_subjects:
                seen_subjects.add(subject)
                subjects.append((subject, hops))
            pending.extend(
                (fact_obj, r, hops + 1) for r in graph.computed.get((fact_type, fact_rel), ())
            )
            for parent_type, parent_rel, tupleset in graph.ttu.get((fact_type, fact_rel), ()):
                for key in reader.read_by_user(fact_obj, parent_type):
                    if key.relation == tupleset and follows(key, parent_type, parent_rel):
                        pending.append((key.object, parent_rel, hops + 1))

    if user_relation:
        add_fact(f"{user_type}:{user_id}", user_relation, 0)
        yield from found
        found.clear()
    while subjects:
        if out_of_time():
            return
        subject, hops = subjects.popleft()
        for type_name in types_for(subject):
            for key in reader.read_by_user(subject, type_name):
                if follows(key, type_name, key.relation):
                    add_fact(key.object, key.relation, hops + 1)
                    yield from found
                    found.clear()


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
        walk = _walk(self._request, self._graph, object_type, relation, user, self._out_of_time)
        exact_within = self._exact_hops()
        for candidate, hops in walk:
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
