"""Passkeys (issue 22): one facade, :class:`PasskeyService`, for REST, GraphQL and gRPC."""

from bastion.service.passkeys.service import PasskeyService

__all__ = ["PasskeyService"]
