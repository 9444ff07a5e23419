"""ListObjects' reverse walk: from the user over :class:`ReverseGraph`, reading tuples by
user, to every object of the listed type the user may reach (a superset; Check confirms).

Over a store read on demand (:mod:`core.fga.on_demand`) an evaluation runs in rounds, and
a round's reads that missed are fetched before the next. Run again from the start, each
round would walk again every fact the rounds before it walked: a cold ListObjects over a
folder tree walks the whole tree once more in its last round. So the walk keeps its state
in the request (:attr:`RoundReader.carried`) and each round goes on from where the last
one ended: a read that missed is a unit of work (a subject's tuples of one type, or a
fact's tuple-to-userset parents) done again in the next round, when its answer is there;
every other read was answered and its consequences are facts already. Doing a unit again
is harmless (facts and subjects are sets), so a read that missed only partly (a request's
contextual tuples answered, the store's not) is simply done again whole.

The state is carried only from a round whose walk ended on its own (the subjects all
walked, or the deadline passed between two units); a round stopped in the middle (an
error, or its caller took what it needed and left) leaves it marked, and the next round
starts afresh, as every round did before. Once the deadline has passed, a round walks
nothing further, not even the reads the last one missed: the search answers with what
it had, in the round after the deadline, as when each round walked from the start.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence

from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.on_demand import MISSED, RoundReader
from bastion.core.fga.request import RequestContext
from bastion.core.fga.tuples import TupleKey, split_object, split_user

__all__ = ["ReverseWalk"]

#: A read of a subject's tuples of one type: (subject, type, hops).
_SubjectUnit = tuple[str, str, int]
#: A read of a fact's tuple-to-userset parents: (object, parent type, parent relation,
#: tupleset relation, hops).
_ParentUnit = tuple[str, str, str, str, int]


class ReverseWalk:
    """The walk towards ``object_type#relation`` from ``user``, resumable across rounds
    (see the module docstring); :meth:`run` yields ``(object, hops)`` for every candidate
    found so far, each once a round, with the steps of the path that reached it."""

    def __init__(self, graph: ReverseGraph, object_type: str, relation: str, user: str) -> None:
        self._graph = graph
        self._target = (object_type, relation, user)
        self._leading = graph.leading_to(object_type, relation)
        self._facts: set[tuple[str, str]] = set()
        self._subjects: deque[tuple[str, int]] = deque()
        self._seen_subjects = {user}
        #: Every candidate found, in the order found.
        self._found: list[tuple[str, int]] = []
        self._subject_units: list[_SubjectUnit] = []
        self._parent_units: list[_ParentUnit] = []
        #: By a subject's (type, relation): the types whose tuples the walk may follow from
        #: it, those with a relation leading to the target that admits it directly.
        self._admitting: dict[tuple[str, str], tuple[str, ...]] = {}
        self._started = False
        #: False while a round runs, and after one stopped in the middle.
        self.whole = True

    @classmethod
    def for_request(
        cls,
        request: RequestContext,
        graph: ReverseGraph,
        object_type: str,
        relation: str,
        user: str,
    ) -> ReverseWalk:
        """The request's walk: carried from the last round if it ended whole, else new."""
        store = request.store
        if not isinstance(store, RoundReader):
            return cls(graph, object_type, relation, user)
        key = ("list_objects", object_type, relation, user)
        walk = store.carried.get(key)
        if not isinstance(walk, ReverseWalk) or not walk.whole:
            walk = store.carried[key] = cls(graph, object_type, relation, user)
        return walk

    def run(
        self, request: RequestContext, out_of_time: Callable[[], bool]
    ) -> Iterator[tuple[str, int]]:
        """The candidates found by earlier rounds, then the walk from where it ended; it
        stops early once ``out_of_time()``."""
        self.whole = False
        found = self._found
        yield from found[: len(found)]
        if out_of_time():  # what missed is not walked any further
            self.whole = True
            return
        new = len(found)
        facts, subjects, seen_subjects = self._facts, self._subjects, self._seen_subjects
        computed, ttu, leading = self._graph.computed, self._graph.ttu, self._leading
        object_type, relation, user = self._target
        read_by_user = request.reader.read_by_user
        valid, condition_holds = request.valid, request.condition_holds
        store = request.store
        missed = store.missed_by_user if isinstance(store, RoundReader) else None
        #: Through contextual tuples, a store read that missed may answer those alone, and
        #: the store's ``MISSED`` is not seen.
        overlaid = store is not request.reader
        subject_units, self._subject_units = self._subject_units, []
        parent_units, self._parent_units = self._parent_units, []
        redo_subject, redo_parents = self._subject_units.append, self._parent_units.append

        def read(user: str, type_name: str) -> tuple[Sequence[TupleKey], bool]:
            """The tuples, and whether the store's answer missed (the unit is redone)."""
            keys = read_by_user(user, type_name)
            if overlaid:
                return keys, missed is not None and missed(user, type_name)
            return keys, keys is MISSED

        def follows(key: TupleKey, type_name: str, rel: str) -> bool:
            """Whether the walk takes ``key`` towards ``type_name#rel``; raises FgaError."""
            if (type_name, rel) not in leading or not valid(key):
                return False
            return condition_holds(key)

        def parents(
            obj: str, parent_type: str, parent_rel: str, tupleset: str, hops: int
        ) -> list[tuple[str, str, int]]:
            """``obj``'s parents over ``tupleset`` that lead to ``parent_type#parent_rel``."""
            keys, was_missed = read(obj, parent_type)
            if was_missed:
                redo_parents((obj, parent_type, parent_rel, tupleset, hops))
            return [
                (key.object, parent_rel, hops + 1)
                for key in keys
                if key.relation == tupleset and follows(key, parent_type, parent_rel)
            ]

        def add_facts(pending: list[tuple[str, str, int]]) -> None:
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
                    (fact_obj, r, hops + 1) for r in computed.get((fact_type, fact_rel), ())
                )
                for parent_type, parent_rel, tupleset in ttu.get((fact_type, fact_rel), ()):
                    pending.extend(parents(fact_obj, parent_type, parent_rel, tupleset, hops))

        def subject_tuples(subject: str, type_name: str, hops: int) -> None:
            keys, was_missed = read(subject, type_name)
            if was_missed:
                redo_subject((subject, type_name, hops))
            for key in keys:
                if follows(key, type_name, key.relation):
                    add_facts([(key.object, key.relation, hops + 1)])

        for unit in subject_units:
            subject_tuples(*unit)
        for parent_unit in parent_units:
            add_facts(parents(*parent_unit))
        if not self._started:
            self._started = True
            user_type, user_id, user_relation = split_user(user)
            subjects.append((user, 0))
            if not user_relation and user_id != "*":
                subjects.append((f"{user_type}:*", 0))
            if user_relation:
                add_facts([(f"{user_type}:{user_id}", user_relation, 0)])
        if len(found) > new:
            yield from found[new:]
            new = len(found)
        while subjects:
            if out_of_time():
                break
            subject, hops = subjects.popleft()
            for type_name in self._types_for(request, subject):
                subject_tuples(subject, type_name, hops)
                if len(found) > new:
                    yield from found[new:]
                    new = len(found)
        self.whole = True

    def _types_for(self, request: RequestContext, subject: str) -> tuple[str, ...]:
        subject_type, _, subject_relation = split_user(subject)
        form = (subject_type, subject_relation)
        types = self._admitting.get(form)
        if types is None:
            ts = request.ts
            types = self._admitting[form] = tuple(
                type_name
                for type_name in ts.types
                if any(
                    ref.type == subject_type and (ref.relation or "") == subject_relation
                    for leading_type, rel in self._leading
                    if leading_type == type_name
                    for ref in ts.directly_related(type_name, rel)
                )
            )
        return types
