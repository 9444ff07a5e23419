"""A model indexed once for evaluation, and tuple validity against it.

OpenFGA binds no tuple to a model: every read is filtered through the *current* model.
:meth:`TypeSystem.tuple_problem` answers "would this tuple be written today?" (type and
relation exist, a restriction admits the user's form, the condition binding matches);
evaluation silently skips tuples with a problem, while contextual tuples with one are
refused with 2027.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from bastion.core.fga.cel import ConditionError, compile_condition
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.model import (
    AuthorizationModel,
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
from bastion.core.fga.tuples import TupleKey, split_object, split_user

if TYPE_CHECKING:
    from bastion.core.fga.conditions import CompiledCondition

__all__ = ["TypeSystem", "rewrite_children"]

_WHITESPACE = re.compile(r"\s")

#: At most this many of :meth:`TypeSystem.tuple_problem`'s answers are kept (one per
#: distinct tuple met); past it the cache starts over. Unbounded, it kept every tuple ever
#: read under the model for the model's life: deleted ones, and every contextual tuple a
#: request brought.
VALIDITY_CACHE_ENTRIES = 1 << 18


def _object_type(obj: str) -> str | None:
    """``obj``'s type when it is a well-formed object (``type:id``), else ``None``."""
    object_type, _, object_id = obj.partition(":")
    if (
        not object_type
        or not object_id  # also when there is no ":"
        or ":" in object_id
        or object_id == "*"
        or "#" in obj
        or " " in obj
        or "\t" in obj
        or "\n" in obj
    ):
        return None
    return object_type


def _user_parts(user: str) -> tuple[str, str, str] | None:
    """``user`` split (:func:`split_user`) when it is well formed, else ``None``."""
    if user.count(":") != 1 or user.count("#") > 1:
        return None
    parts = split_user(user)
    if not parts[0] or not parts[1] or _WHITESPACE.search(user):
        return None
    return parts


def _shape(key: TupleKey) -> tuple[str, str, str, str, bool, str] | None:
    """What the model's verdict on ``key`` depends on (the object's type, the relation,
    the user's type and relation, a wildcard user, the condition), or ``None`` when its
    ids are not well formed."""
    object_type = _object_type(key.object)
    user = _user_parts(key.user)
    if object_type is None or user is None:
        return None
    user_type, user_id, user_relation = user
    return object_type, key.relation, user_type, user_relation, user_id == "*", key.condition


def rewrite_children(rewrite: Rewrite) -> tuple[Rewrite, ...]:
    match rewrite:
        case Union(children) | Intersection(children):
            return children
        case Difference(base, subtract):
            return (base, subtract)
        case _:
            return ()


def _contains_this(rewrite: Rewrite) -> bool:
    return isinstance(rewrite, This) or any(_contains_this(c) for c in rewrite_children(rewrite))


class TypeSystem:
    """Lookups over one model, built once; conditions compiled lazily and kept."""

    def __init__(self, model: AuthorizationModel) -> None:
        self.model = model
        self.types: dict[str, TypeDefinition] = {t.name: t for t in model.type_definitions}
        self._compiled: dict[str, CompiledCondition] = {}
        self.tuplesets: set[tuple[str, str]] = set()
        for typedef in model.type_definitions:
            for relation in typedef.relations.values():
                self._collect_tuplesets(typedef.name, relation.rewrite)
        #: tuple_problem's answers, ``""`` for none
        self._valid_cache: dict[tuple[str, str, str, str], str] = {}
        #: The shapes (:func:`_shape`) of the well-formed tuples found valid so far.
        self._valid_shapes: set[tuple[str, str, str, str, bool, str]] = set()

    def _collect_tuplesets(self, type_name: str, rewrite: Rewrite) -> None:
        if isinstance(rewrite, TupleToUserset):
            self.tuplesets.add((type_name, rewrite.tupleset))
        for child in rewrite_children(rewrite):
            self._collect_tuplesets(type_name, child)

    def relation(self, type_name: str, relation: str) -> Relation | None:
        typedef = self.types.get(type_name)
        return None if typedef is None else typedef.relations.get(relation)

    def has_relation(self, type_name: str, relation: str) -> bool:
        return self.relation(type_name, relation) is not None

    def is_assignable(self, type_name: str, relation: str) -> bool:
        rel = self.relation(type_name, relation)
        return rel is not None and _contains_this(rel.rewrite)

    def directly_related(self, type_name: str, relation: str) -> tuple[RelationRef, ...]:
        rel = self.relation(type_name, relation)
        return () if rel is None else rel.directly_related

    def condition(self, name: str) -> CompiledCondition:
        compiled = self._compiled.get(name)
        if compiled is None:
            definition = self.model.conditions.get(name)
            if definition is None:
                raise ConditionError(f"condition {name!r} is not defined")
            compiled = self._compiled[name] = compile_condition(definition)
        return compiled

    # ------------------------------------------------------------ tuple validity

    def user_problem(self, user: str) -> str | None:
        """Why ``user`` is not a well-formed user of this model, or ``None``."""
        parts = _user_parts(user)
        if parts is None:
            return f"invalid user '{user}'"
        user_type, user_id, user_relation = parts
        if user_type not in self.types:
            return f"type '{user_type}' not found"
        if user_id == "*" and user_relation:
            return f"invalid user '{user}'"
        if user_relation and not self.has_relation(user_type, user_relation):
            return f"relation '{user_type}#{user_relation}' not found"
        return None

    def object_problem(self, obj: str, relation: str) -> tuple[ErrorCode, str] | None:
        """Loose validation of ``obj#relation`` (Check's request tuple)."""
        object_type = _object_type(obj)
        if object_type is None:
            return ErrorCode.VALIDATION_ERROR, f"invalid object '{obj}'"
        typedef = self.types.get(object_type)
        if typedef is None:
            return ErrorCode.TYPE_NOT_FOUND, f"type '{object_type}' not found"
        if relation not in typedef.relations:
            return ErrorCode.RELATION_NOT_FOUND, f"relation '{object_type}#{relation}' not found"
        return None

    def tuple_problem(self, key: TupleKey) -> str | None:
        """Why ``key`` could not be written under this model today, or ``None``."""
        cache = self._valid_cache
        cache_key = (key.object, key.relation, key.user, key.condition)
        problem = cache.get(cache_key)
        if problem is None:
            if len(cache) >= VALIDITY_CACHE_ENTRIES:
                cache.clear()
            problem = cache[cache_key] = self._tuple_problem(key) or ""
        return problem or None

    def _tuple_problem(self, key: TupleKey) -> str | None:
        """A well-formed tuple of a shape found valid before is valid: past its ids' form,
        what the model says of a tuple depends on its shape alone. A cold walk meets
        thousands of tuples of a few shapes, each once."""
        shape = _shape(key)
        if shape is not None and shape in self._valid_shapes:
            return None
        problem = self._model_problem(key)
        if problem is None and shape is not None:
            self._valid_shapes.add(shape)
        return problem

    def _model_problem(self, key: TupleKey) -> str | None:
        bad_object = self.object_problem(key.object, key.relation)
        if bad_object is not None:
            return bad_object[1]
        bad_user = self.user_problem(key.user)
        if bad_user is not None:
            return bad_user
        object_type = split_object(key.object)[0]
        user_type, user_id, user_relation = split_user(key.user)
        if (object_type, key.relation) in self.tuplesets and (user_relation or user_id == "*"):
            return f"tupleset relation '{key.relation}' only admits objects"
        if key.condition and key.condition not in self.model.conditions:
            return f"condition '{key.condition}' not found"
        for ref in self.directly_related(object_type, key.relation):
            if ref.type != user_type or ref.condition != key.condition:
                continue
            if user_relation:
                if ref.relation == user_relation:
                    return None
            elif user_id == "*":
                if ref.wildcard:
                    return None
            elif ref.relation is None and not ref.wildcard:
                return None
        return f"type restrictions of '{object_type}#{key.relation}' do not admit '{key.user}'"

    def validate_contextual(self, tuples: list[TupleKey]) -> None:
        """Raise 2027 for the first contextual tuple that fails strict validation."""
        for key in tuples:
            problem = self.tuple_problem(key)
            if problem is None and key.condition and key.context is not None:
                problem = self._context_problem(key.condition, key.context)
            if problem is not None:
                raise FgaError(
                    ErrorCode.INVALID_TUPLE, f"invalid contextual tuple {key}: {problem}"
                )

    def _context_problem(self, condition: str, context: Mapping[str, object]) -> str | None:
        params = self.model.conditions[condition].parameters
        unknown = sorted(set(context) - set(params))
        return f"unknown condition parameters {unknown}" if unknown else None
