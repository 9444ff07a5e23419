"""Request limits for ``/graphql``: depth, aliases, complexity, body size, introspection.

Authorizer enforces depth, alias and complexity limits on the operation it is about to
run, in that order, and stops at the first one exceeded; the messages below are its
messages, word for word. The measures are Authorizer's (gqlgen's) too:

* depth: a root field is at depth 1, each nested selection adds one; fragments (inline
  or spread) add no level of their own;
* aliases: every field whose alias differs from its name, fragments included;
* complexity: every field costs 1 plus the cost of its selection (gqlgen's default),
  except ``__schema``, which is free so that an introspection query is not refused
  for its size.

Unlike Authorizer these run BEFORE the standard validation, on the raw operation, so
that a hostile document (thousands of aliases, for example) is refused before
graphql-core's quadratic overlap check ever sees it. The walk is therefore written for
documents that may be invalid: unknown fragments are ignored, fragment cycles are cut,
and each fragment is measured once (memoised), so nested spreads cannot make it
exponential.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)

from bastion.core.errors import FailedPrecondition, InvalidArgument, PayloadTooLarge

__all__ = [
    "DEFAULT_LIMITS",
    "DisabledIntrospectionRule",
    "QueryLimits",
    "check_body_size",
    "check_operation_limits",
]

#: ``extensions.code`` of a request refused by a limit (what REST answers for a bad body).
LIMIT_CODE = InvalidArgument.code

#: Disabled introspection is a feature switched off by configuration: REST answers
#: ``failed_precondition`` for those, so GraphQL does too.
INTROSPECTION_DISABLED_CODE = FailedPrecondition.code
INTROSPECTION_DISABLED_MESSAGE = "introspection disabled"


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryLimits:
    """Limits for one GraphQL endpoint; Authorizer's defaults (flags ``--graphql-max-*``)."""

    max_depth: int = 15
    max_aliases: int = 30
    max_complexity: int = 300
    max_body_bytes: int = 1 << 20
    introspection: bool = True

    def __post_init__(self) -> None:
        for name in ("max_depth", "max_aliases", "max_complexity", "max_body_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


DEFAULT_LIMITS = QueryLimits()


@dataclass(frozen=True, slots=True)
class _Measure:
    depth: int = 0
    aliases: int = 0
    complexity: int = 0


class _Walker:
    """Measures selection sets; each named fragment is measured once."""

    def __init__(self, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self._fragments = fragments
        self._memo: dict[str, _Measure] = {}
        self._in_progress: set[str] = set()

    def selection_set(self, node: SelectionSetNode | None) -> _Measure:
        depth = aliases = complexity = 0
        for selection in node.selections if node is not None else ():
            if isinstance(selection, FieldNode):
                child = self.selection_set(selection.selection_set)
                if selection.alias is not None and selection.alias.value != selection.name.value:
                    aliases += 1
                aliases += child.aliases
                depth = max(depth, 1 + child.depth)
                if selection.name.value != "__schema":
                    complexity += 1 + child.complexity
            else:
                child = self._fragment(selection)
                aliases += child.aliases
                depth = max(depth, child.depth)
                complexity += child.complexity
        return _Measure(depth, aliases, complexity)

    def _fragment(self, node: Any) -> _Measure:
        if isinstance(node, InlineFragmentNode):
            return self.selection_set(node.selection_set)
        if not isinstance(node, FragmentSpreadNode):
            return _Measure()
        name = node.name.value
        known = self._memo.get(name)
        if known is not None:
            return known
        definition = self._fragments.get(name)
        if definition is None or name in self._in_progress:
            return _Measure()  # unknown or cyclic: validation reports it
        self._in_progress.add(name)
        try:
            measure = self.selection_set(definition.selection_set)
        finally:
            self._in_progress.discard(name)
        self._memo[name] = measure
        return measure


def _selected_operation(
    document: DocumentNode, operation_name: str | None
) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        return operations[0] if len(operations) == 1 else None
    for operation in operations:
        if operation.name is not None and operation.name.value == operation_name:
            return operation
    return None


def check_operation_limits(
    document: DocumentNode, operation_name: str | None, limits: QueryLimits
) -> GraphQLError | None:
    """The first limit the selected operation exceeds, as a GraphQL error, or None.

    With no selectable operation there is nothing to measure; execution reports that.
    """
    operation = _selected_operation(document, operation_name)
    if operation is None:
        return None
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    try:
        measure = _Walker(fragments).selection_set(operation.selection_set)
    except RecursionError:
        # Only a chain of thousands of fragments gets here; the parser caps plain nesting.
        measure = None
    if measure is None:
        message = "query nests fragments too deeply"
    elif measure.depth > limits.max_depth:
        message = f"query depth {measure.depth} exceeds maximum allowed depth {limits.max_depth}"
    elif measure.aliases > limits.max_aliases:
        message = f"query uses {measure.aliases} aliases, exceeds maximum {limits.max_aliases}"
    elif measure.complexity > limits.max_complexity:
        message = (
            f"operation has complexity {measure.complexity}, "
            f"which exceeds the limit of {limits.max_complexity}"
        )
    else:
        return None
    return GraphQLError(message, extensions={"code": LIMIT_CODE})


def check_body_size(size: int, limits: QueryLimits) -> GraphQLError | None:
    """Refuse a request body (or a query text) larger than ``limits.max_body_bytes``."""
    if size <= limits.max_body_bytes:
        return None
    return GraphQLError(
        f"request body of {size} bytes exceeds maximum of {limits.max_body_bytes} bytes",
        extensions={"code": PayloadTooLarge.code},
    )


class DisabledIntrospectionRule(ASTValidationRule):
    """Refuses ``__schema`` and ``__type`` (``--enable-graphql-introspection=false``).

    ``__typename`` stays allowed: clients use it for caching, and it reveals nothing
    beyond the type name of a value they already asked for.
    """

    def enter_field(self, node: FieldNode, *_args: object) -> None:
        if node.name.value in ("__schema", "__type"):
            self.report_error(
                GraphQLError(
                    INTROSPECTION_DISABLED_MESSAGE,
                    node,
                    extensions={"code": INTROSPECTION_DISABLED_CODE},
                )
            )
