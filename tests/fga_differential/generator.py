"""Random authorization worlds from a seed: a model, tuples and the questions to ask of it.

A world has users, nested groups, a folder tree and documents. Folder and document
relations are drawn from a small grammar: direct assignments (users, ``user:*``,
``group#member``, ``user with cond``) and rewrites over earlier relations (union,
intersection, exclusion, and those nested over three relations) or over the parent folder
(tuple to userset). Tuples follow the model's type restrictions; parent and group-in-group
tuples point "backwards" only, so the tuple graph is acyclic. Most checks carry a context
that binds the condition's parameter (the rest test OpenFGA's rules for a missing one),
and some checks come with contextual tuples.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.tuples import TupleKey
from bastion.core.fga.validation import check_model

__all__ = ["Query", "World", "draw_models", "generate_world"]

RELATIONS = ("r0", "r1", "r2", "r3", "r4", "r5")
USERS = tuple(f"user:u{i}" for i in range(8))
GROUPS = tuple(f"group:g{i}" for i in range(4))
FOLDERS = tuple(f"folder:f{i}" for i in range(5))
DOCS = tuple(f"doc:d{i}" for i in range(6))


@dataclass(frozen=True, slots=True)
class Query:
    """One check group: a user, an object, a context, maybe contextual tuples."""

    user: str
    object: str
    context: dict[str, Any]
    contextual: tuple[TupleKey, ...] = ()


@dataclass(slots=True)
class World:
    seed: int
    dsl: str
    tuples: list[TupleKey] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)
    #: object type -> relation names, in definition order
    relations: dict[str, list[str]] = field(default_factory=dict)
    #: (type, relation) -> the direct restrictions, as written in the DSL
    direct: dict[tuple[str, str], list[str]] = field(default_factory=dict)


def _direct(rng: random.Random, with_condition: bool) -> list[str]:
    options = ["user", "user:*", "group#member"]
    chosen = [o for o in options if rng.random() < 0.5] or ["user"]
    if with_condition:
        chosen.append("user with cond")
    return chosen


def _rewrite(rng: random.Random, earlier: list[str], name: str, has_parent: bool) -> str:
    a, b = rng.choice(earlier), rng.choice(earlier)
    if a == b and len(earlier) > 1:
        b = rng.choice([r for r in earlier if r != a])
    forms = [f"{a} or {b}", f"{a} and {b}", f"{a} but not {b}"]
    if has_parent:
        forms += [
            f"{name} from parent",
            f"{a} or {name} from parent",
            f"{a} from parent",
            f"({a} or {b}) and {name} from parent",
        ]
    others = [r for r in earlier if r not in (a, b)]
    if a != b and others:  # nested set operators over three relations
        c = rng.choice(others)
        forms += [
            f"({a} but not {b}) or {c}",
            f"{a} and ({b} but not {c})",
            f"({a} or {b}) but not {c}",
            f"{a} but not ({b} but not {c})",
        ]
    form = rng.choice(forms)
    if a == b:  # one relation only: OpenFGA refuses `x or x`
        form = f"{a}" if not has_parent else f"{a} or {name} from parent"
    return form


def _type_relations(
    rng: random.Random, world: World, type_name: str, *, condition_on: str | None
) -> list[str]:
    lines = ["    define parent: [folder]"]
    names: list[str] = []
    count = rng.randint(3, len(RELATIONS))
    for index, name in enumerate(RELATIONS[:count]):
        if index < 2 or rng.random() < 0.35:
            restrictions = _direct(rng, with_condition=name == condition_on)
            world.direct[(type_name, name)] = restrictions
            body = f"[{', '.join(restrictions)}]"
            if names and rng.random() < 0.3:
                body += f" or {rng.choice(names)}"
        else:
            body = _rewrite(rng, names, name, has_parent=True)
        lines.append(f"    define {name}: {body}")
        names.append(name)
    world.relations[type_name] = names
    return lines


def _model(rng: random.Random, world: World) -> str:
    threshold = rng.randint(0, 5)
    folder = _type_relations(rng, world, "folder", condition_on=None)
    doc = _type_relations(rng, world, "doc", condition_on="r0")
    # Folder relations the document's `x from parent` names must exist on folder.
    for name in world.relations["doc"]:
        if name not in world.relations["folder"]:
            folder.append(f"    define {name}: [user]")
            world.relations["folder"].append(name)
            world.direct[("folder", name)] = ["user"]
    return "\n".join(
        [
            "model",
            "  schema 1.1",
            "",
            "type user",
            "",
            "type group",
            "  relations",
            "    define member: [user, user:*, group#member]",
            "",
            "type folder",
            "  relations",
            *folder,
            "",
            "type doc",
            "  relations",
            *doc,
            "",
            "condition cond(x: int) {",
            f"  x > {threshold}",
            "}",
            "",
        ]
    )


def _user_for(rng: random.Random, restriction: str) -> tuple[str, str, dict[str, Any] | None]:
    """(user, condition name, stored context) admitted by one restriction."""
    if restriction == "user:*":
        return "user:*", "", None
    if restriction == "group#member":
        return f"{rng.choice(GROUPS)}#member", "", None
    if restriction == "user with cond":
        context = {"x": rng.randint(0, 6)} if rng.random() < 0.4 else None
        return rng.choice(USERS), "cond", context
    return rng.choice(USERS), "", None


def _tuples(rng: random.Random, world: World) -> list[TupleKey]:
    found: dict[str, TupleKey] = {}

    def add(key: TupleKey) -> None:
        found.setdefault(str(key), key)

    for i, group in enumerate(GROUPS):
        for user in rng.sample(USERS, 2):
            add(TupleKey(group, "member", user))
        if i and rng.random() < 0.6:
            add(TupleKey(group, "member", f"{GROUPS[rng.randrange(i)]}#member"))
    if rng.random() < 0.2:
        add(TupleKey(rng.choice(GROUPS), "member", "user:*"))
    for i, folder in enumerate(FOLDERS):
        if i:
            add(TupleKey(folder, "parent", FOLDERS[rng.randrange(i)]))
    for doc in DOCS:
        add(TupleKey(doc, "parent", rng.choice(FOLDERS)))
    for (type_name, relation), restrictions in world.direct.items():
        objects = FOLDERS if type_name == "folder" else DOCS
        for _ in range(rng.randint(2, 9)):
            user, condition, context = _user_for(rng, rng.choice(restrictions))
            add(TupleKey(rng.choice(objects), relation, user, condition, context))
    return list(found.values())


def _contextual(rng: random.Random, world: World) -> tuple[TupleKey, ...]:
    keys: dict[str, TupleKey] = {}
    for _ in range(rng.randint(1, 3)):
        type_name, relation = rng.choice(sorted(world.direct))
        objects = FOLDERS if type_name == "folder" else DOCS
        user, condition, _ = _user_for(rng, rng.choice(world.direct[(type_name, relation)]))
        key = TupleKey(rng.choice(objects), relation, user, condition)
        keys.setdefault(str(key), key)
    return tuple(keys.values())


def _valid(dsl: str) -> bool:
    try:
        check_model(parse_model(dsl))
    except FgaError:
        return False
    return True


def draw_models(seed: int, count: int) -> list[tuple[str, bool]]:
    """``count`` model drafts, valid or not, each with bastion/core/fga's verdict on it."""
    rng = random.Random(seed)
    drafts = [_model(rng, World(seed, "")) for _ in range(count)]
    return [(dsl, _valid(dsl)) for dsl in drafts]


def generate_world(seed: int) -> World:
    rng = random.Random(seed)
    while True:  # some draws have a relation without an entry point: draw again
        world = World(seed, "")
        world.dsl = _model(rng, world)
        if _valid(world.dsl):
            break
    world.tuples = _tuples(rng, world)
    stored = {str(k) for k in world.tuples}
    for user in USERS:
        for obj in (*FOLDERS, *DOCS):
            # A quarter of the checks carry no context: conditions may miss their parameter.
            context = {"x": rng.randint(0, 6)} if rng.random() < 0.75 else {}
            world.queries.append(Query(user, obj, context))
    for _ in range(12):
        extra = tuple(k for k in _contextual(rng, world) if str(k) not in stored)
        if extra:
            world.queries.append(
                Query(
                    rng.choice(USERS),
                    rng.choice((*FOLDERS, *DOCS)),
                    {"x": rng.randint(0, 6)},
                    extra,
                )
            )
    return world
