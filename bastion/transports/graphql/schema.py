"""The executable schema: Authorizer's SDL with root fields bound to service calls.

``build_schema(resolvers)`` binds each root Query/Mutation field, by name, to an async
callable ``(context, args) -> result``: ``context`` is the ``context_value`` the
transport passed to :func:`transports.graphql.execution.execute_operation`, ``args`` the
field's coerced arguments (``{"params": {...}}``, or ``{"param": {...}}`` for
``_revoke_access``/``_enable_access``), and the result a dict or an object whose
keys/attributes are the output type's field names. Nested fields resolve by key or
attribute.

A root field with no resolver is not silently null: it fails with ``Unimplemented``.
The deprecated operations always fail with Authorizer's messages and are not bindable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from functools import cache
from importlib.resources import files
from typing import Any

from graphql import (
    DocumentNode,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLSchema,
    GraphQLString,
    build_ast_schema,
    get_named_type,
    get_nullable_type,
    is_list_type,
    parse,
)

from bastion.core.errors import Unimplemented
from bastion.core.limits import TEXT_LIMITS

from .scalars import install_scalars

__all__ = [
    "DEPRECATED_OPERATIONS",
    "UNIMPLEMENTED_MESSAGE",
    "Resolver",
    "build_schema",
    "schema_sdl",
]

Resolver = Callable[[Any, dict[str, Any]], Awaitable[Any]]

UNIMPLEMENTED_MESSAGE = "not implemented in this build"

#: Operations Authorizer 2.x keeps in its schema but always refuses (configuration moved
#: to command-line flags; phone signup/login merged into signup/login).
#:
#: Their code is ``unimplemented``, not ``failed_precondition``: ``failed_precondition``
#: is what REST answers for a feature the operator switched off, something a different
#: configuration would make work. No configuration makes these work; the server does not
#: offer the operation at all, which is exactly gRPC's UNIMPLEMENTED ("not implemented or
#: not supported/enabled in this service") and also what an unbound operation answers.
DEPRECATED_OPERATIONS: Mapping[str, str] = {
    "_env": "deprecated",
    "_update_env": "deprecated. please configure env via cli args",
    "_admin_signup": "deprecated. please configure admin secret via cli args",
    "_generate_jwt_keys": "deprecated. please configure jwt keys via cli args",
    "mobile_signup": "deprecated, use signup with mobile phone_number",
    "mobile_login": "deprecated, use login with mobile phone_number",
}


@cache
def schema_sdl() -> str:
    """The schema's SDL text (``schema.graphql`` beside this module)."""
    return files(__package__).joinpath("schema.graphql").read_text(encoding="utf-8")


@cache
def _sdl_document() -> DocumentNode:
    return parse(schema_sdl())


def _refusing(message: str) -> Callable[..., Awaitable[Any]]:
    async def refuse(_root: object, _info: GraphQLResolveInfo[Any], **_args: Any) -> Any:
        raise Unimplemented(message)

    return refuse


def _bound(resolver: Resolver) -> Callable[..., Awaitable[Any]]:
    async def resolve(_root: object, info: GraphQLResolveInfo[Any], **args: Any) -> Any:
        return await resolver(info.context, args)

    return resolve


def _root_fields(schema: GraphQLSchema) -> dict[str, GraphQLField]:
    fields: dict[str, GraphQLField] = {}
    for root in (schema.query_type, schema.mutation_type):
        if root is None:
            continue
        for name, field in root.fields.items():
            if name in fields:
                raise ValueError(f"root field {name!r} is both a query and a mutation")
            fields[name] = field
    return fields


#: Fields of Authorizer's newer schema whose value the service already answers under
#: another name (gRPC's messages have no such field): type, field -> the answer's key.
DERIVED_FIELDS = {
    ("AdminMeta", "is_multi_factor_auth_service_enabled"): "is_multi_factor_auth_enabled",
}


def _derived(key: str) -> Callable[..., Any]:
    def resolve(root: Mapping[str, Any], _info: GraphQLResolveInfo[Any]) -> Any:
        return root.get(key)

    return resolve


def build_schema(resolvers: Mapping[str, Resolver] | None = None) -> GraphQLSchema:
    """A fresh executable schema with ``resolvers`` bound to root fields by name.

    Raises ``ValueError`` for a name that is not a root field or is a deprecated
    operation, so that a typo cannot leave an operation unbound unnoticed.
    """
    resolvers = resolvers or {}
    schema = build_ast_schema(_sdl_document())
    install_scalars(schema)
    fields = _root_fields(schema)
    unknown = sorted(set(resolvers) - set(fields))
    if unknown:
        raise ValueError(f"not root fields of the schema: {', '.join(unknown)}")
    deprecated = sorted(set(resolvers) & set(DEPRECATED_OPERATIONS))
    if deprecated:
        raise ValueError(f"deprecated operations cannot be bound: {', '.join(deprecated)}")
    for name, field in fields.items():
        if name in DEPRECATED_OPERATIONS:
            field.resolve = _refusing(DEPRECATED_OPERATIONS[name])
        elif name in resolvers:
            field.resolve = _bound(resolvers[name])
        else:
            field.resolve = _refusing(UNIMPLEMENTED_MESSAGE)
    for (type_name, field_name), key in DERIVED_FIELDS.items():
        type_ = schema.get_type(type_name)
        assert isinstance(type_, GraphQLObjectType), type_name
        type_.fields[field_name].resolve = _derived(key)
    _document_limits(schema)
    return schema


def _document_limits(schema: GraphQLSchema) -> None:
    """Each text input field's declared maximum (``core.limits``) as its description."""
    for type_ in schema.type_map.values():
        if not isinstance(type_, GraphQLInputObjectType):
            continue
        for name, field in type_.fields.items():
            limit = TEXT_LIMITS.get(name)
            if limit is not None and get_named_type(field.type) is GraphQLString:
                each = (
                    "Each item at most"
                    if is_list_type(get_nullable_type(field.type))
                    else "At most"
                )
                field.description = f"{each} {limit} characters."
