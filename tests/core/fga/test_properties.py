"""Hypothesis: on random small models without conditions, the engine agrees with a naive
set-semantics evaluator, and ListObjects / ListUsers agree with Check.

Models are layered (``t1``, ``t2``, ``t3``; usersets and parents point only to lower
layers; computed relations only to lower-numbered relations of the same type), so tuple
graphs are acyclic and the naive evaluator needs no cycle or depth rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bastion.core.fga.check import Checker, check
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.model import (
    AuthorizationModel,
    ComputedUserset,
    Difference,
    Intersection,
    Relation,
    RelationRef,
    Rewrite,
    This,
    TupleToUserset,
    TypeDefinition,
    Union,
)
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem
from bastion.core.fga.validation import validate_model

USERS = ("user:a", "user:b", "user:c")
LAYERS = ("t1", "t2", "t3")
RELATIONS = ("r0", "r1", "r2")
IDS = ("0", "1")


@dataclass(frozen=True)
class World:
    model: AuthorizationModel
    tuples: tuple[TupleKey, ...]


@st.composite
def rewrites(
    draw: st.DrawFn, layer: int, index: int, depth: int = 0, algebra: bool = True
) -> Rewrite:
    options = ["this"]
    if index > 0:
        options.append("computed")
    if layer > 0:
        options.append("ttu")
    if depth < 2:
        options += ["union", "intersection", "difference"] if algebra else ["union"]
    kind = draw(st.sampled_from(options))
    if kind == "this":
        return This()
    if kind == "computed":
        return ComputedUserset(draw(st.sampled_from(RELATIONS[:index])))
    if kind == "ttu":
        return TupleToUserset("parent", draw(st.sampled_from(RELATIONS)))
    left = draw(rewrites(layer, index, depth + 1, algebra))
    right = draw(rewrites(layer, index, depth + 1, algebra))
    if kind == "union":
        return Union((left, right))
    if kind == "intersection":
        return Intersection((left, right))
    return Difference(left, right)


def has_this(rewrite: Rewrite) -> bool:
    if isinstance(rewrite, This):
        return True
    if isinstance(rewrite, Union | Intersection):
        return any(has_this(c) for c in rewrite.children)
    if isinstance(rewrite, Difference):
        return has_this(rewrite.base) or has_this(rewrite.subtract)
    return False


@st.composite
def worlds(draw: st.DrawFn, algebra: bool = True) -> World:
    """A layered model and its tuples; ``algebra=False``: no intersection or exclusion."""
    types = [TypeDefinition("user")]
    tuples: list[TupleKey] = []
    for layer, name in enumerate(LAYERS):
        relations: dict[str, Relation] = {}
        if layer > 0:
            relations["parent"] = Relation("parent", This(), (RelationRef(LAYERS[layer - 1]),))
            for obj in IDS:
                if draw(st.booleans()):
                    parent = f"{LAYERS[layer - 1]}:{draw(st.sampled_from(IDS))}"
                    tuples.append(TupleKey(f"{name}:{obj}", "parent", parent))
        for index, rel in enumerate(RELATIONS):
            rewrite = draw(rewrites(layer, index, algebra=algebra))
            refs: list[RelationRef] = []
            if has_this(rewrite):
                refs = [RelationRef("user"), RelationRef("user", wildcard=True)]
                if layer > 0:
                    refs.append(RelationRef(LAYERS[layer - 1], draw(st.sampled_from(RELATIONS))))
                users = [*USERS, "user:*"] + [
                    f"{r.type}:{i}#{r.relation}" for r in refs if r.relation for i in IDS
                ]
                for obj in IDS:
                    for user in draw(st.lists(st.sampled_from(users), max_size=3, unique=True)):
                        tuples.append(TupleKey(f"{name}:{obj}", rel, user))
            relations[rel] = Relation(rel, rewrite, tuple(refs))
        types.append(TypeDefinition(name, relations))
    return World(AuthorizationModel("1.1", tuple(types)), tuple(tuples))


class Naive:
    """users(object, relation) as plain sets over the finite user universe."""

    def __init__(self, world: World) -> None:
        self.types = {t.name: t for t in world.model.type_definitions}
        self.tuples = world.tuples

    def users(self, obj: str, relation: str) -> set[str]:
        typedef = self.types[obj.split(":")[0]]
        return self.rewrite(obj, typedef.relations[relation].rewrite, relation)

    def rewrite(self, obj: str, rewrite: Rewrite, relation: str) -> set[str]:
        if isinstance(rewrite, This):
            out: set[str] = set()
            for t in self.tuples:
                if t.object == obj and t.relation == relation:
                    if t.user == "user:*":
                        out |= set(USERS)
                    elif "#" in t.user:
                        target, _, rel = t.user.partition("#")
                        out |= self.users(target, rel)
                    else:
                        out.add(t.user)
            return out
        if isinstance(rewrite, ComputedUserset):
            return self.users(obj, rewrite.relation)
        if isinstance(rewrite, TupleToUserset):
            out = set()
            for t in self.tuples:
                if t.object == obj and t.relation == rewrite.tupleset:
                    out |= self.users(t.user, rewrite.computed)
            return out
        if isinstance(rewrite, Union):
            return set().union(*(self.rewrite(obj, c, relation) for c in rewrite.children))
        if isinstance(rewrite, Intersection):
            sets = [self.rewrite(obj, c, relation) for c in rewrite.children]
            return set.intersection(*sets)
        assert isinstance(rewrite, Difference)
        return self.rewrite(obj, rewrite.base, relation) - self.rewrite(
            obj, rewrite.subtract, relation
        )


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(worlds())
def test_generated_models_only_break_entry_point_and_duplicate_rules(world: World) -> None:
    kinds = {e.error_type for e in validate_model(world.model)}
    assert kinds <= {"relation-no-entry-point", "duplicated-error"}


@SETTINGS
@given(worlds())
def test_check_agrees_with_naive_evaluator(world: World) -> None:
    ts = TypeSystem(world.model)
    store = MemoryTupleReader(world.tuples)
    naive = Naive(world)
    for layer in LAYERS:
        for obj in (f"{layer}:{i}" for i in IDS):
            for rel in RELATIONS:
                expected = naive.users(obj, rel)
                for user in USERS:
                    assert check(ts, store, obj, rel, user) == (user in expected), (obj, rel, user)


@SETTINGS
@given(worlds())
def test_list_objects_agrees_with_check(world: World) -> None:
    ts = TypeSystem(world.model)
    store = MemoryTupleReader(world.tuples)
    for layer in LAYERS:
        for rel in RELATIONS:
            for user in USERS:
                listed = set(list_objects(ts, store, layer, rel, user).items)
                truth = {f"{layer}:{i}" for i in IDS if check(ts, store, f"{layer}:{i}", rel, user)}
                assert listed == truth, (layer, rel, user)


@SETTINGS
@given(worlds(algebra=False))
def test_list_users_agrees_with_check_without_set_algebra(world: World) -> None:
    # OpenFGA's ListUsers is exact over unions, computed relations, TTU and usersets; with
    # intersection or exclusion it lists what its lossy algebra finds, even users its own
    # Check denies (test_list_users_quirks.py pins those answers, recorded from OpenFGA).
    ts = TypeSystem(world.model)
    store = MemoryTupleReader(world.tuples)
    for layer in LAYERS:
        for rel in RELATIONS:
            for obj in (f"{layer}:{i}" for i in IDS):
                listed_users = set(list_users(ts, store, obj, rel, UserFilter("user")).items)
                for user in listed_users:
                    assert check(ts, store, obj, rel, user), (obj, rel, user)
                for user in USERS:
                    if check(ts, store, obj, rel, user):
                        assert user in listed_users or "user:*" in listed_users, (obj, rel, user)


@SETTINGS
@given(worlds())
def test_one_checker_shared_by_many_checks_answers_like_fresh_ones(world: World) -> None:
    # check_permissions answers a whole batch on one Checker (one memo): sharing must not
    # change any answer, whatever order the questions and users come in.
    ts = TypeSystem(world.model)
    store = MemoryTupleReader(world.tuples)
    shared = Checker(RequestContext(ts, store, RequestOptions()))
    for user in (*USERS, "user:*"):
        for layer in reversed(LAYERS):
            for obj in (f"{layer}:{i}" for i in IDS):
                for rel in RELATIONS:
                    assert shared.check(obj, rel, user) == check(ts, store, obj, rel, user)
