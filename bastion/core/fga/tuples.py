"""Relationship tuples, the reader protocol the evaluator asks, and an in-memory reader.

The evaluator never touches storage: it calls a synchronous :class:`TupleReader`, which a
driver answers from memory, SQL or a cache. :class:`MemoryTupleReader` keeps a forward
index ``object -> relation -> {user: tuple}`` (with the userset tuples apart) and a
reverse index ``(user, object type) -> [tuple]``; :class:`CombinedReader` overlays a
request's contextual tuples on a store for that request only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "CombinedReader",
    "MemoryTupleReader",
    "TupleKey",
    "TupleReader",
    "is_valid_object_id",
    "split_object",
    "split_user",
]


@dataclass(frozen=True, slots=True)
class TupleKey:
    """``object#relation@user``, maybe bound to a condition with a stored context."""

    object: str
    relation: str
    user: str
    condition: str = ""
    context: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    def __str__(self) -> str:
        return f"{self.object}#{self.relation}@{self.user}"


def split_object(obj: str) -> tuple[str, str]:
    """``"doc:1"`` -> ``("doc", "1")``; a missing ``:`` gives an empty id."""
    object_type, _, object_id = obj.partition(":")
    return object_type, object_id


def split_user(user: str) -> tuple[str, str, str]:
    """``type:id#rel`` -> ``(type, id, rel)``; ``rel`` is empty for objects and wildcards."""
    obj, _, relation = user.partition("#")
    user_type, user_id = split_object(obj)
    return user_type, user_id, relation


class TupleReader(Protocol):
    """What the evaluator may ask of a tuple store. All answers are unfiltered by model."""

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        """Every tuple ``obj#relation@*``."""
        ...

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        """The tuple(s) ``obj#relation@user``: none or one per source of tuples."""
        ...

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        """Tuples ``obj#relation@T:id#R`` whose user is a userset."""
        ...

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        """Tuples whose user is exactly ``user`` and object has type ``object_type``."""
        ...


#: The usersets of an ``(object, relation)`` that has none (shared: never written to).
_NO_USERSETS: dict[str, TupleKey] = {}


class MemoryTupleReader:
    """A pure, indexed in-memory tuple store (also the contextual-tuples overlay).

    The forward index is by object, then relation, and keeps an ``(object, relation)``'s
    userset tuples beside all its tuples: a check reads several relations of one object
    (the exact tuple, then the usersets, of each), and after the first lookup in the large
    table by object the others are in small, already cached, tables.
    """

    def __init__(self, tuples: Iterable[TupleKey] = ()) -> None:
        #: object -> relation -> (tuples by user, the userset tuples among them by user)
        self._forward: dict[str, dict[str, tuple[dict[str, TupleKey], dict[str, TupleKey]]]] = {}
        self._reverse: dict[tuple[str, str], dict[tuple[str, str], TupleKey]] = {}
        self.revision = 0
        for key in tuples:
            self.write(key)

    def __len__(self) -> int:
        return sum(
            len(users) for relations in self._forward.values() for users, _ in relations.values()
        )

    def write(self, key: TupleKey) -> None:
        """Insert or replace ``key`` (identified by object, relation and user)."""
        relations = self._forward.get(key.object)
        if relations is None:
            relations = self._forward[key.object] = {}
        entry = relations.get(key.relation)
        if entry is None:
            entry = relations[key.relation] = ({}, _NO_USERSETS)
        entry[0][key.user] = key
        if "#" in key.user:
            usersets = entry[1]
            if usersets is _NO_USERSETS:
                usersets = {}
                relations[key.relation] = (entry[0], usersets)
            usersets[key.user] = key
        object_type = split_object(key.object)[0]
        self._reverse.setdefault((key.user, object_type), {})[(key.object, key.relation)] = key
        self.revision += 1

    def delete(self, key: TupleKey) -> bool:
        relations = self._forward.get(key.object)
        entry = None if relations is None else relations.get(key.relation)
        if relations is None or entry is None or entry[0].pop(key.user, None) is None:
            return False
        entry[1].pop(key.user, None)  # absent from _NO_USERSETS: that one stays empty
        if not entry[0]:
            del relations[key.relation]
            if not relations:
                del self._forward[key.object]
        object_type = split_object(key.object)[0]
        self._reverse.get((key.user, object_type), {}).pop((key.object, key.relation), None)
        self.revision += 1
        return True

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        relations = self._forward.get(obj)
        entry = None if relations is None else relations.get(relation)
        return () if entry is None else list(entry[0].values())

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        relations = self._forward.get(obj)
        entry = None if relations is None else relations.get(relation)
        found = None if entry is None else entry[0].get(user)
        return () if found is None else (found,)

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        relations = self._forward.get(obj)
        entry = None if relations is None else relations.get(relation)
        return () if entry is None or not entry[1] else list(entry[1].values())

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        return list(self._reverse.get((user, object_type), {}).values())

    def read_object(self, obj: str, limit: int) -> Sequence[TupleKey]:
        """Every tuple of ``obj`` if it has at most ``limit``; else ``limit + 1`` of them
        (the caller learns that it has more): :mod:`core.fga.on_demand`'s whole-object
        read."""
        found: list[TupleKey] = []
        for users, _ in self._forward.get(obj, {}).values():
            for key in users.values():
                found.append(key)
                if len(found) > limit:
                    return found
        return found


class CombinedReader:
    """Contextual tuples first, then the store: one request's view, nothing persisted."""

    def __init__(self, contextual: TupleReader, store: TupleReader) -> None:
        self._contextual = contextual
        self._store = store

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        return [*self._contextual.read(obj, relation), *self._store.read(obj, relation)]

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        return [
            *self._contextual.read_exact(obj, relation, user),
            *self._store.read_exact(obj, relation, user),
        ]

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        return [
            *self._contextual.read_usersets(obj, relation),
            *self._store.read_usersets(obj, relation),
        ]

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        return [
            *self._contextual.read_by_user(user, object_type),
            *self._store.read_by_user(user, object_type),
        ]


_OBJECT_ID = re.compile(r"[^#:\s*][a-zA-Z0-9_|*@.+/-]*")


def is_valid_object_id(object_id: str) -> bool:
    """OpenFGA's object-id rule: no ``#``, ``:`` or whitespace, and no leading ``*``."""
    return _OBJECT_ID.fullmatch(object_id) is not None
