"""Small builders shared by the engine tests."""

from __future__ import annotations

from typing import Any

from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem

HEADER = "model\n  schema 1.1\n"

#: Groups nested in groups, folders in folders, documents in folders; viewing is granted
#: on folders and documents and inherited down the tree.
NESTED = """type user
type group
  relations
    define member: [user, group#member]
type folder
  relations
    define parent: [folder]
    define viewer: [user, group#member] or viewer from parent
type doc
  relations
    define parent: [folder]
    define viewer: [user, group#member] or viewer from parent
"""


def key(text: str, condition: str = "", context: dict[str, Any] | None = None) -> TupleKey:
    """``"doc:1#viewer@user:anne"`` -> TupleKey."""
    left, _, user = text.rpartition("@")
    obj, _, relation = left.partition("#")
    return TupleKey(obj, relation, user, condition, context)


def world(dsl: str, *tuples: str | TupleKey) -> tuple[TypeSystem, MemoryTupleReader]:
    ts = TypeSystem(parse_model(HEADER + dsl))
    store = MemoryTupleReader(t if isinstance(t, TupleKey) else key(t) for t in tuples)
    return ts, store
