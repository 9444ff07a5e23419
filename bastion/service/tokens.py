"""Signing and verifying JWTs: the configured key, and an optional second one for rotation.

Tokens are signed with the primary key (``--jwt-type`` and its material) only. They are
verified with the primary key, then the secondary (``--jwt-secondary-*``), each with
exactly its own algorithm: ``alg: none`` and HS/RS confusion (an HMAC signed with the
public key) are refused because no other algorithm is ever allowed, whatever the token's
header says. What the claims must contain is decided in ``core.auth.claims``.

Key ids: an RSA or EC key's ``kid`` is its RFC 7638 thumbprint, so after a rotation (old
key moved to ``--jwt-secondary-*``) ``/.well-known/jwks.json`` still serves the old public
key under the ``kid`` that the old tokens carry, and relying parties that pick keys by
``kid`` keep verifying them. An HMAC key is never published; its ``kid`` is the client id
(``<client id>-secondary`` for the second key), as in Authorizer. A token naming a ``kid``
that is none of ours is refused; the client id itself (tokens of earlier builds) is
accepted and tried against every key.

A token whose signature held is remembered (:data:`VERIFIED_CACHE_ENTRIES` of them, per
signer): the same access token presented again (a client validating it on every call of
its own) skips the signature check and the JSON decoding, about a third of the CPU of a
``validate_jwt_token`` beside the memory store's read. Only the signature is remembered;
the claims (expiry first) and the session are checked on every use, as before. A signer's
keys never change (new keys come with a new signer), so nothing it remembers goes stale.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OctKey, RSAKey

from bastion.core.errors import Unauthenticated
from bastion.core.settings import Settings

Key = OctKey | RSAKey | ECKey

#: How many verified tokens one signer remembers; all are forgotten when it is full.
VERIFIED_CACHE_ENTRIES = 10_000


class InvalidToken(Unauthenticated):
    """The token's signature, algorithm or key id does not check out."""


@dataclass(frozen=True, slots=True)
class _SigningKey:
    algorithm: str
    key: Key
    kid: str


def _load(
    algorithm: str, secret: str, private_pem: str, public_pem: str, hmac_kid: str
) -> _SigningKey:
    family = algorithm[:2]
    key: Key
    if family == "HS":
        return _SigningKey(algorithm, OctKey.import_key(secret.encode()), hmac_kid)
    if family in ("RS", "PS"):
        key = RSAKey.import_key(private_pem or public_pem)
    else:
        key = ECKey.import_key(private_pem or public_pem)
    return _SigningKey(algorithm, key, str(key.thumbprint()))


def _header(token: str) -> dict[str, Any] | None:
    head = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return decoded if isinstance(decoded, dict) else None


class TokenSigner:
    def __init__(self, settings: Settings) -> None:
        self.algorithm = settings.jwt_type.upper()
        self._client_id = settings.client_id
        self._primary = _load(
            self.algorithm, settings.jwt_secret, settings.jwt_private_key, "", settings.client_id
        )
        self.kid = self._primary.kid
        self._keys = [self._primary]
        self._verified: dict[str, dict[str, Any]] = {}
        if settings.jwt_secondary_type:
            self._keys.append(
                _load(
                    settings.jwt_secondary_type.upper(),
                    settings.jwt_secondary_secret,
                    settings.jwt_secondary_private_key,
                    settings.jwt_secondary_public_key,
                    f"{settings.client_id}-secondary",
                )
            )

    def algorithms(self) -> list[str]:
        """Every algorithm a token we accept may be signed with (primary first)."""
        return list(dict.fromkeys(k.algorithm for k in self._keys))

    def sign(self, claims: dict[str, Any]) -> str:
        primary = self._primary
        header = {"alg": primary.algorithm, "typ": "JWT", "kid": primary.kid}
        return jwt.encode(header, claims, primary.key, algorithms=[primary.algorithm])

    def _candidates(self, token: str) -> list[_SigningKey]:
        header = _header(token)
        if header is None:
            return []
        kid = header.get("kid")
        named = [k for k in self._keys if k.kid == kid]
        if kid is None or kid == self._client_id:
            # an HMAC primary's name, or a token of an earlier build: the key it names
            # may since have become the secondary, so every key is tried (named first)
            return named + [k for k in self._keys if k not in named]
        return named

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims if its signature holds under one of our keys; claims are
        not checked. The caller gets its own copy of them."""
        known = self._verified.get(token)
        if known is not None:
            return dict(known)
        for candidate in self._candidates(token):
            try:
                decoded = jwt.decode(token, candidate.key, algorithms=[candidate.algorithm])
            except (JoseError, ValueError, TypeError):
                continue
            claims = dict(decoded.claims)
            if len(self._verified) >= VERIFIED_CACHE_ENTRIES:
                self._verified.clear()
            self._verified[token] = claims
            return dict(claims)
        raise InvalidToken("invalid token")

    def jwks(self) -> dict[str, Any]:
        """Public keys for ``/.well-known/jwks.json``; none for a shared HMAC secret."""
        keys = []
        for k in self._keys:
            if isinstance(k.key, OctKey):
                continue
            public = k.key.as_dict(private=False)
            keys.append({**public, "use": "sig", "alg": k.algorithm, "kid": k.kid})
        return {"keys": keys}
