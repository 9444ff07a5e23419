"""Signing and verifying JWTs with the configured key (``--jwt-type`` and its material).

Verification accepts exactly the configured algorithm: ``alg: none`` and HS/RS confusion
(an HMAC signed with the public key) are refused because no other algorithm is ever
allowed, whatever the token's header says. Every token carries ``kid``; a token naming
another key is refused. What the claims must contain is decided in ``core.auth.claims``.
"""

from __future__ import annotations

from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OctKey, RSAKey

from core.errors import Unauthenticated
from core.settings import Settings

Key = OctKey | RSAKey | ECKey


class InvalidToken(Unauthenticated):
    """The token's signature, algorithm or key id does not check out."""


class TokenSigner:
    def __init__(self, settings: Settings) -> None:
        self.algorithm = settings.jwt_type.upper()
        self.kid = settings.client_id
        family = self.algorithm[:2]
        self._key: Key
        if family == "HS":
            self._key = OctKey.import_key(settings.jwt_secret.encode())
        elif family in ("RS", "PS"):
            self._key = RSAKey.import_key(settings.jwt_private_key)
        else:
            self._key = ECKey.import_key(settings.jwt_private_key)

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": self.algorithm, "typ": "JWT", "kid": self.kid}
        return jwt.encode(header, claims, self._key, algorithms=[self.algorithm])

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims if its signature holds under our key; claims are not checked."""
        try:
            decoded = jwt.decode(token, self._key, algorithms=[self.algorithm])
        except (JoseError, ValueError, TypeError):
            raise InvalidToken("invalid token") from None
        if decoded.header.get("kid", self.kid) != self.kid:
            raise InvalidToken("invalid token")
        return dict(decoded.claims)

    def jwks(self) -> dict[str, Any]:
        """Public keys for ``/.well-known/jwks.json``; none for a shared HMAC secret."""
        if isinstance(self._key, OctKey):
            return {"keys": []}
        public = self._key.as_dict(private=False)
        return {"keys": [{**public, "use": "sig", "alg": self.algorithm, "kid": self.kid}]}
