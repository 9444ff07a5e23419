"""GraphQL: Authorizer's schema, a trio-safe executor, limits and error rendering, and
``POST /graphql`` over the shared HTTP pieces. Imports ``service``, ``core`` and
``transports.http``; no other transport."""

from .execution import TrioExecutor, execute_operation
from .limits import DEFAULT_LIMITS, QueryLimits
from .schema import DEPRECATED_OPERATIONS, Resolver, build_schema, schema_sdl

__all__ = [
    "DEFAULT_LIMITS",
    "DEPRECATED_OPERATIONS",
    "QueryLimits",
    "Resolver",
    "TrioExecutor",
    "build_schema",
    "execute_operation",
    "schema_sdl",
]
