"""The default :class:`~core.ports.TokenSigner`: HMAC-signed JWTs (``bastion-core[jwt]``).

joserfc is imported when a signer is made, never when ``core`` is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from bastion.core.errors import Unauthenticated

__all__ = ["JwtSigner"]

_ALGORITHMS = ("HS256", "HS384", "HS512")


class JwtSigner:
    """Signs and verifies compact JWTs with a shared secret (HS256 by default)."""

    def __init__(self, secret: str | bytes, *, algorithm: str = "HS256") -> None:
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}")
        if len(secret) < 32:
            raise ValueError("an HMAC secret needs at least 32 bytes")
        self._jwt: Any = importlib.import_module("joserfc.jwt")
        self._error: type[Exception] = importlib.import_module("joserfc.errors").JoseError
        self._key = importlib.import_module("joserfc.jwk").OctKey.import_key(secret)
        self._algorithm = algorithm

    @property
    def algorithm(self) -> str:
        return self._algorithm

    def sign(self, claims: Mapping[str, Any]) -> str:
        header = {"alg": self._algorithm, "typ": "JWT"}
        token: str = self._jwt.encode(header, dict(claims), self._key, algorithms=[self.algorithm])
        return token

    def verify(self, token: str) -> dict[str, Any]:
        try:
            decoded = self._jwt.decode(token, self._key, algorithms=[self._algorithm])
        except (self._error, ValueError, TypeError):
            raise Unauthenticated("invalid token") from None
        return dict(decoded.claims)
