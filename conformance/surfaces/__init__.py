"""The three real clients behind the one abstract ``call(operation, request, credentials)``."""

from __future__ import annotations

from conformance.surfaces.base import Surface, Unexpressible
from conformance.surfaces.graphql import GraphQLSurface
from conformance.surfaces.grpc import GrpcSurface
from conformance.surfaces.rest import RestSurface

__all__ = ["GraphQLSurface", "GrpcSurface", "RestSurface", "Surface", "Unexpressible"]
