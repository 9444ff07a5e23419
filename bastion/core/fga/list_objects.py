"""ListObjects: every object of a type on which ``user`` has ``relation``.

Reverse expansion from the user over :class:`ReverseGraph` collects candidate objects
(reading tuples by user, so the cost follows what the user can reach), then each candidate
is confirmed with Check in one shared request, so the answer agrees with Check exactly.
At most ``max_results`` objects are returned; ``truncated`` says more exist.

As OpenFGA's reverse expansion does, the walk only follows tuples on relations that can
lead to the listed one, and evaluates the condition of every tuple it follows: one that
does not hold is not followed, one that cannot be evaluated (a missing parameter) fails
the whole request, even when the user reaches the object another way.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from bastion.core.fga.check import Checker
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import TupleKey, TupleReader, split_object, split_user
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["ListResult", "list_objects"]


@dataclass(frozen=True, slots=True)
class ListResult:
    items: tuple[str, ...]
    truncated: bool = False


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


def candidates(
    request: RequestContext, graph: ReverseGraph, object_type: str, relation: str, user: str
) -> list[str]:
    """Objects of ``object_type`` that may have ``relation`` for ``user`` (a superset)."""
    ts, reader = request.ts, request.reader
    facts: set[tuple[str, str]] = set()
    subjects: deque[str] = deque([user])
    seen_subjects = {user}
    user_type, user_id, user_relation = split_user(user)
    if not user_relation and user_id != "*":
        subjects.append(f"{user_type}:*")
    found: list[str] = []
    leading = graph.leading_to(object_type, relation)

    def follows(key: TupleKey, type_name: str, rel: str) -> bool:
        """Whether the walk takes ``key`` towards ``type_name#rel``; raises FgaError."""
        if (type_name, rel) not in leading or not request.valid(key):
            return False
        return request.condition_holds(key)

    def add_fact(obj: str, rel: str) -> None:
        pending = [(obj, rel)]
        while pending:
            fact = pending.pop()
            if fact in facts:
                continue
            facts.add(fact)
            fact_obj, fact_rel = fact
            fact_type = split_object(fact_obj)[0]
            if fact_type == object_type and fact_rel == relation:
                found.append(fact_obj)
            subject = f"{fact_obj}#{fact_rel}"
            if subject not in seen_subjects:
                seen_subjects.add(subject)
                subjects.append(subject)
            pending.extend((fact_obj, r) for r in graph.computed.get((fact_type, fact_rel), ()))
            for parent_type, parent_rel, tupleset in graph.ttu.get((fact_type, fact_rel), ()):
                for key in reader.read_by_user(fact_obj, parent_type):
                    if key.relation == tupleset and follows(key, parent_type, parent_rel):
                        pending.append((key.object, parent_rel))

    if user_relation:
        add_fact(f"{user_type}:{user_id}", user_relation)
    while subjects:
        subject = subjects.popleft()
        for type_name in ts.types:
            for key in reader.read_by_user(subject, type_name):
                if follows(key, type_name, key.relation):
                    add_fact(key.object, key.relation)
    return sorted(set(found))


def list_objects(
    ts: TypeSystem,
    store: TupleReader,
    object_type: str,
    relation: str,
    user: str,
    options: RequestOptions | None = None,
    graph: ReverseGraph | None = None,
) -> ListResult:
    options = options or RequestOptions()
    _validate(ts, object_type, relation, user)
    request = RequestContext(ts, store, options)
    checker = Checker(request)
    allowed: list[str] = []
    error: FgaError | None = None
    graph = graph or ReverseGraph.build(ts)
    for candidate in candidates(request, graph, object_type, relation, user):
        try:
            ok = checker.check(candidate, relation, user)
        except FgaError as exc:
            if exc.fga_code == ErrorCode.RESOLUTION_TOO_COMPLEX:
                raise
            error = error or exc
            continue
        if ok:
            if len(allowed) == options.max_results:
                return ListResult(tuple(allowed), truncated=True)
            allowed.append(candidate)
    if error is not None and len(allowed) < options.max_results:
        raise error
    return ListResult(tuple(allowed))
