"""Check's compiled rewrites: each relation's rewrite as nested closures (a *plan*), and
OpenFGA's strategies for reading a direct relation's usersets.

A plan is called with the running check (:class:`PlanContext`, which
:class:`~core.fga.check.Checker` is) and an object. It depends on that interface only,
so the checker can depend on the plans without a circle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Protocol
from weakref import WeakKeyDictionary

from bastion.core.fga import reducers
from bastion.core.fga.errors import FgaError
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
from bastion.core.fga.result import ALLOWED, DENIED, Outcome
from bastion.core.fga.tuples import TupleKey, TupleReader
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["Plan", "PlanContext", "plans_of"]


class PlanContext(Protocol):
    """What a plan reads of the running check and asks of it."""

    reader: TupleReader
    plans: dict[tuple[str, str], Plan]
    #: The check's user, its type, and whether it is ``type:*`` or a userset's relation.
    user: str
    user_type: str
    user_wildcard: bool
    user_relation: str
    #: The user's form as one string (the direct plans' per-form flags are keyed by it).
    form: str

    def resolve(self, obj: str, relation: str, plan: Plan | None) -> Outcome: ...

    def dispatch(self, obj: str, relation: str, plan: Plan | None) -> Outcome: ...

    def passing(self, keys: Sequence[TupleKey]) -> tuple[list[TupleKey], FgaError | None]: ...


#: A compiled rewrite: (check, object) -> outcome, for the check's user.
Plan = Callable[[PlanContext, str], Outcome]
#: For a direct relation and a user's form: may it match exactly, through ``type:*``, and
#: may a userset tuple lead to it?
_DirectFlags = tuple[bool, bool, bool]

#: Each model's plans by ``(type, relation)``.
_PLANS: WeakKeyDictionary[TypeSystem, dict[tuple[str, str], Plan]] = WeakKeyDictionary()


class _PlanRef:
    """A relation's plan, filled in once every plan of the model is compiled (plans refer
    to each other, cycles included)."""

    __slots__ = ("plan",)

    def __init__(self) -> None:
        self.plan: Plan | None = None


def plans_of(ts: TypeSystem) -> dict[tuple[str, str], Plan]:
    plans = _PLANS.get(ts)
    if plans is None:
        refs: dict[tuple[str, str], _PlanRef] = {}

        def ref(type_name: str, relation: str) -> _PlanRef:
            found = refs.get((type_name, relation))
            if found is None:
                found = refs[(type_name, relation)] = _PlanRef()
            return found

        plans = {
            (typedef.name, name): _compile(ts, ref, typedef.name, name, relation.rewrite)
            for typedef in ts.model.type_definitions
            for name, relation in typedef.relations.items()
        }
        for key, holder in refs.items():
            holder.plan = plans.get(key)
        _PLANS[ts] = plans
    return plans


_RefOf = Callable[[str, str], _PlanRef]


def _compile(ts: TypeSystem, ref: _RefOf, type_name: str, relation: str, rewrite: Rewrite) -> Plan:
    match rewrite:
        case This():
            refs = ts.directly_related(type_name, relation)
            lenient, user_side = _userset_strategy(ts, type_name, relation, refs)
            return _direct_plan(refs, relation, lenient, user_side)
        case ComputedUserset(computed):
            target = ref(type_name, computed)
            if not _is_leaf(ts, type_name, computed):

                def computed_plan(checker: PlanContext, obj: str) -> Outcome:
                    return checker.resolve(obj, computed, target.plan)

                return computed_plan

            def computed_leaf_plan(checker: PlanContext, obj: str) -> Outcome:
                # A leaf reads tuples and goes nowhere: nothing worth memoising, no path to
                # mark, unless the user is a userset (which may be this very step).
                plan = target.plan
                if checker.user_relation or plan is None:
                    return checker.resolve(obj, computed, plan)
                return plan(checker, obj)

            return computed_leaf_plan
        case TupleToUserset(tupleset, computed):
            return _tuple_to_userset_plan(ts, ref, type_name, tupleset, computed)
        case Union(children):
            steps = tuple(_compile(ts, ref, type_name, relation, c) for c in children)
            return partial(reducers.union, steps)
        case Intersection(children):
            steps = tuple(_compile(ts, ref, type_name, relation, c) for c in children)
            return partial(reducers.intersection, steps)
        case Difference(base, subtract):
            base_plan = _compile(ts, ref, type_name, relation, base)
            subtract_plan = _compile(ts, ref, type_name, relation, subtract)
            return partial(reducers.difference, base_plan, subtract_plan)


def _is_leaf(ts: TypeSystem, type_name: str, relation: str) -> bool:
    """Whether ``type_name#relation`` is only directly assigned, and never to a userset: its
    plan reads tuples and dispatches nothing."""
    definition = ts.relation(type_name, relation)
    return (
        definition is not None
        and isinstance(definition.rewrite, This)
        and all(ref.relation is None for ref in definition.directly_related)
    )


def _direct_flags(refs: tuple[RelationRef, ...], user: str) -> _DirectFlags:
    obj, _, user_relation = user.partition("#")
    user_type, _, user_id = obj.partition(":")
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
    return exact_ok, wildcard_ok, userset_ok


def _direct_plan(
    refs: tuple[RelationRef, ...], relation: str, lenient: bool, user_side: _UserSide | None
) -> Plan:
    flags_by_form: dict[str, _DirectFlags] = {}

    def direct_plan(checker: PlanContext, obj: str) -> Outcome:
        flags = flags_by_form.get(checker.form)
        if flags is None:
            flags = flags_by_form[checker.form] = _direct_flags(refs, checker.user)
        exact_ok, wildcard_ok, userset_ok = flags
        reader = checker.reader
        error: FgaError | None = None
        if exact_ok:
            found = reader.read_exact(obj, relation, checker.user)
            if found:
                passing, error = checker.passing(found)
                if passing:
                    return ALLOWED
        if wildcard_ok:
            found = reader.read_exact(obj, relation, checker.user_type + ":*")
            if found:
                passing, read_error = checker.passing(found)
                if passing:
                    return ALLOWED
                error = error or read_error
        usersets = reader.read_usersets(obj, relation) if userset_ok else ()
        if not usersets:
            return DENIED if error is None else Outcome.failed(error)
        passing, read_error = checker.passing(usersets)
        if lenient and passing:
            read_error = None
        cycle = False
        plans = checker.plans
        for key in passing:
            set_object, _, set_relation = key.user.partition("#")
            plan = plans.get((set_object.partition(":")[0], set_relation))
            outcome = checker.dispatch(set_object, set_relation, plan)
            if outcome is DENIED:
                continue
            if outcome.allowed:
                return ALLOWED
            error = error or outcome.error
            cycle = cycle or outcome.cycle
        return _nothing_allowed(checker, passing, user_side, cycle, error or read_error)

    return direct_plan


def _tuple_to_userset_plan(
    ts: TypeSystem, ref: _RefOf, type_name: str, tupleset: str, computed: str
) -> Plan:
    #: the parent types that define ``computed`` (other parents are skipped), and the plan
    #: of ``computed`` on each
    targets = {
        t.name: ref(t.name, computed) for t in ts.model.type_definitions if computed in t.relations
    }
    parent_refs = ts.directly_related(type_name, tupleset)
    user_side = None
    if len(parent_refs) == 1 and parent_refs[0].relation is None:
        user_side = _UserSide.of(ts, parent_refs[0].type, computed)

    def tuple_to_userset_plan(checker: PlanContext, obj: str) -> Outcome:
        parents = checker.reader.read(obj, tupleset)
        if not parents:
            return DENIED
        passing, read_error = checker.passing(parents)
        error: FgaError | None = None
        cycle = False
        for key in passing:
            parent = key.user
            target = targets.get(parent.partition(":")[0])
            if target is None:
                continue
            outcome = checker.dispatch(parent, computed, target.plan)
            if outcome is DENIED:
                continue
            if outcome.allowed:
                return ALLOWED
            error = error or outcome.error
            cycle = cycle or outcome.cycle
        return _nothing_allowed(checker, passing, user_side, cycle, error or read_error)

    return tuple_to_userset_plan


class _UserSide:
    """OpenFGA's check from the user's side of a two-hop path, and the errors it meets.

    When ``object#relation`` reaches the user through one kind of parent only (one
    ``type#rel`` restriction, or a tupleset of one type), and that parent's relation holds
    users with no further hop (its direct restrictions, through unions, intersections,
    computed relations and exclusion bases, name no userset and no tupleset), OpenFGA
    reads every tuple of the user on those relations of the parent type and evaluates
    their conditions, whether or not the parent is linked to the object (recorded with
    ``fga model test``). So such a tuple that cannot be evaluated fails the check unless
    another path allows it. Only relations whose restrictions carry a condition can fail
    that way; others are not looked at.
    """

    def __init__(self, parent_type: str, relations: frozenset[str]) -> None:
        self.parent_type = parent_type
        self.relations = relations

    @classmethod
    def of(cls, ts: TypeSystem, parent_type: str, relation: str) -> _UserSide | None:
        found = _one_hop_relations(ts, parent_type, relation)
        conditioned = frozenset(
            name
            for name in found or ()
            if any(ref.condition for ref in ts.directly_related(parent_type, name))
        )
        return cls(parent_type, conditioned) if conditioned else None

    def error(self, checker: PlanContext) -> FgaError | None:
        read = checker.reader.read_by_user
        keys = [
            key
            for subject in (checker.user, f"{checker.user_type}:*")
            for key in read(subject, self.parent_type)
            if key.relation in self.relations
        ]
        return checker.passing(keys)[1] if keys else None


def _one_hop_relations(ts: TypeSystem, type_name: str, relation: str) -> frozenset[str] | None:
    """The relations ``type_name#relation`` is made of when it holds users with no further
    hop (OpenFGA's weight one), else ``None``."""
    found: set[str] = set()
    pending = [relation]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.add(name)
        definition = ts.relation(type_name, name)
        if definition is None or not _one_hop(definition.rewrite, pending):
            return None
        if any(ref.relation is not None for ref in definition.directly_related):
            return None
    return frozenset(found)


def _userset_strategy(
    ts: TypeSystem, type_name: str, relation: str, refs: tuple[RelationRef, ...]
) -> tuple[bool, _UserSide | None]:
    """How OpenFGA reads a direct relation's userset tuples for a user: ``(lenient,
    user side)``.

    OpenFGA has two strategies beside dispatching each userset: one for a relation that
    admits its own ``type#relation`` (recursive), one for a relation whose usersets are
    all of one ``type#rel`` holding users with no further hop (:class:`_UserSide`). Both
    read the object's userset tuples through a filter that drops a tuple whose condition
    cannot be evaluated and reports that only when no userset tuple passed (*lenient*;
    recorded with ``fga model test``); the plain strategy reports it unless a userset
    allows the user.
    """
    parents = {(ref.type, ref.relation) for ref in refs if ref.relation is not None}
    if (type_name, relation) in parents:
        return True, None
    if len(parents) != 1:
        return False, None
    [(parent_type, parent_relation)] = parents
    if parent_relation is None or _one_hop_relations(ts, parent_type, parent_relation) is None:
        return False, None
    return True, _UserSide.of(ts, parent_type, parent_relation)


def _one_hop(rewrite: Rewrite, computed: list[str]) -> bool:
    """Whether ``rewrite`` stays on its object (collecting the relations it computes)."""
    match rewrite:
        case This():
            return True
        case ComputedUserset(name):
            computed.append(name)
            return True
        case TupleToUserset():
            return False
        case Union(children) | Intersection(children):
            return all(_one_hop(child, computed) for child in children)
        case Difference(base, _):
            return _one_hop(base, computed)


def _nothing_allowed(
    checker: PlanContext,
    passing: Sequence[TupleKey],
    user_side: _UserSide | None,
    cycle: bool,
    error: FgaError | None,
) -> Outcome:
    """The answer of a plan whose ``passing`` tuples led to no ``allowed``: the first error
    met, else the one OpenFGA meets from the user's side (:class:`_UserSide`), else
    ``False``."""
    if (
        passing
        and user_side is not None
        and not checker.user_wildcard
        and not checker.user_relation
    ):
        error = error or user_side.error(checker)
    return _denied(cycle, error)


def _denied(cycle: bool, error: FgaError | None) -> Outcome:
    """A union that found nothing: its first error, else ``False`` (cycle flag kept)."""
    if error is None and not cycle:
        return DENIED
    if error is not None:
        return Outcome(False, cycle, error)
    return Outcome(False, cycle) if cycle else DENIED
