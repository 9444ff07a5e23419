"""Authorizer's custom scalars: ``Int64``, ``Map`` and ``Any``.

The SDL only declares them; :func:`install_scalars` gives the built schema their
coercion rules. They follow gqlgen's, which Authorizer's clients are used to:

* ``Int64``: a signed 64-bit integer. Input accepts a JSON integer or a base-10 string
  (gqlgen's ``UnmarshalInt64`` does too); output is a Python ``int``.
* ``Map``: a JSON object, a ``dict`` with string keys on both sides.
* ``Any``: any JSON value, passed through.

A value that does not fit raises ``ValueError``/``TypeError``; graphql-core turns that
into a located error (input) or a field error (output).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphql import (
    GraphQLScalarType,
    GraphQLSchema,
    IntValueNode,
    ObjectValueNode,
    StringValueNode,
    ValueNode,
    value_from_ast_untyped,
)

__all__ = ["INT64_MAX", "INT64_MIN", "install_scalars"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _int64_in_range(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} overflows a 64-bit integer")
    return value


def _int64_output(value: Any) -> int:
    # bool is an int subclass; True is not a number on the wire.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Int64 cannot represent {type(value).__name__} value")
    return _int64_in_range(value)


def _int64_from_string(text: str) -> int:
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        raise ValueError(f"{text!r} is not an integer")
    return _int64_in_range(int(text))


def _int64_input(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("Int64 cannot represent a boolean")
    if isinstance(value, int):
        return _int64_in_range(value)
    if isinstance(value, str):
        return _int64_from_string(value)
    raise TypeError(f"{type(value).__name__} is not an int")


def _int64_literal(node: ValueNode) -> int:
    if isinstance(node, IntValueNode):
        return _int64_in_range(int(node.value))
    if isinstance(node, StringValueNode):
        return _int64_from_string(node.value)
    raise TypeError("Int64 needs an integer literal")


def _map_output(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"Map cannot represent {type(value).__name__} value")
    return dict(value)


def _map_input(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{type(value).__name__} is not a map")
    return value


def _map_literal(node: ValueNode) -> dict[str, Any]:
    if not isinstance(node, ObjectValueNode):
        raise TypeError("Map needs an object literal")
    return _map_input(value_from_ast_untyped(node))


def _any_value(value: Any) -> Any:
    return value


def _any_literal(node: ValueNode) -> Any:
    return value_from_ast_untyped(node)


def _install(scalar: GraphQLScalarType, output: Any, input_value: Any, input_literal: Any) -> None:
    scalar.coerce_output_value = output
    scalar.coerce_input_value = input_value
    scalar.coerce_input_literal = input_literal
    # The legacy names are what some graphql-core utilities still call.
    scalar.serialize = output  # type: ignore[method-assign]
    scalar.parse_value = input_value  # type: ignore[method-assign]


def install_scalars(schema: GraphQLSchema) -> None:
    """Give the schema's ``Int64``, ``Map`` and ``Any`` their coercion rules."""
    rules = {
        "Int64": (_int64_output, _int64_input, _int64_literal),
        "Map": (_map_output, _map_input, _map_literal),
        "Any": (_any_value, _any_value, _any_literal),
    }
    for name, (output, input_value, input_literal) in rules.items():
        scalar = schema.type_map.get(name)
        if isinstance(scalar, GraphQLScalarType):
            _install(scalar, output, input_value, input_literal)
