"""The FGA engine on its own: a DSL model, your own tuple store, check / list_objects /
expand. No server, no database: the evaluator asks a ``TupleReader`` for the tuples it
needs, and this one answers from a plain list.

Run: ``python examples/fga_alone.py`` (exits non-zero when an answer is wrong).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from bastion.core.fga import (
    TupleKey,
    TypeSystem,
    check,
    check_model,
    expand,
    list_objects,
    parse_model,
)

MODEL = """
model
  schema 1.1

type user

type team
  relations
    define member: [user]

type folder
  relations
    define owner: [user]
    define viewer: [user, team#member] or owner

type document
  relations
    define parent: [folder]
    define editor: [user]
    define viewer: [user] or editor or viewer from parent
"""


class ListReader:
    """A TupleReader over a list: every question is a scan (fine for a few tuples)."""

    def __init__(self, tuples: Sequence[TupleKey]) -> None:
        self.tuples = list(tuples)

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        return [t for t in self.tuples if (t.object, t.relation) == (obj, relation)]

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        return [t for t in self.read(obj, relation) if t.user == user]

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        return [t for t in self.read(obj, relation) if "#" in t.user]

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        return [
            t for t in self.tuples if t.user == user and t.object.partition(":")[0] == object_type
        ]


def check_that(what: str, got: object, expected: object) -> None:
    ok = got == expected
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {got!r}")
    if not ok:
        sys.exit(1)


def main() -> None:
    model = parse_model(MODEL)
    check_model(model)
    types = TypeSystem(model)
    store = ListReader(
        [
            TupleKey("team:writers", "member", "user:bob"),
            TupleKey("folder:plans", "owner", "user:ann"),
            TupleKey("folder:plans", "viewer", "team:writers#member"),
            TupleKey("document:roadmap", "parent", "folder:plans"),
            TupleKey("document:memo", "editor", "user:carl"),
        ]
    )
    check_that(
        "ann views the roadmap (owner of its folder)",
        check(types, store, "document:roadmap", "viewer", "user:ann"),
        True,
    )
    check_that(
        "bob views the roadmap (his team views the folder)",
        check(types, store, "document:roadmap", "viewer", "user:bob"),
        True,
    )
    check_that(
        "carl does not view the roadmap",
        check(types, store, "document:roadmap", "viewer", "user:carl"),
        False,
    )
    listed = list_objects(types, store, "document", "viewer", "user:bob")
    check_that("documents bob views", sorted(listed.items), ["document:roadmap"])
    listed = list_objects(types, store, "document", "viewer", "user:carl")
    check_that("documents carl views", sorted(listed.items), ["document:memo"])
    tree = expand(types, store, "folder:plans", "viewer")["tree"]["root"]
    users = tree["union"]["nodes"][0]["leaf"]["users"]["users"]
    check_that("who views folder:plans directly", users, ["team:writers#member"])


if __name__ == "__main__":
    main()
