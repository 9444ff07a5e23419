"""The three real clients behind the one abstract ``call(operation, request, credentials)``."""

from __future__ import annotations

from bastion.conformance.surfaces.base import Surface, Unexpressible
from bastion.conformance.surfaces.graphql import GraphQLSurface
from bastion.conformance.surfaces.grpc import GrpcSurface
from bastion.conformance.surfaces.rest import RestSurface

__all__ = ["GraphQLSurface", "GrpcSurface", "RestSurface", "Surface", "Unexpressible"]
