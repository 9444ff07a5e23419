"""The default :class:`~core.ports.TokenSigner`: HMAC-signed JWTs (RFC 7515 / 7519) on the
standard library alone.

An HS256/384/512 compact JWS is a JSON header, a JSON payload and an HMAC over the two,
each base64url-encoded; doing it here keeps joserfc and cryptography (15 MB) out of
``bastion-core``. Verification is strict, the way a token that a server reads back must be:
the header's ``alg`` must be the signer's own (so ``none`` and every other algorithm are
refused, whatever the token asks for), a ``crit`` header is refused (there is no extension
we understand), every segment must be canonical base64url (a token has one spelling, so
it can be used as a key), and the MAC is compared in constant time. Claims are not checked
here (``exp``, ``nbf``): the flows check them, as the ``TokenSigner`` protocol says.
The MAC is checked before the header is read; with one algorithm per signer, the header
only has to agree.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from bastion.core.errors import Unauthenticated

__all__ = ["JwtSigner"]

_DIGESTS: dict[str, Callable[[], Any]] = {
    "HS256": hashlib.sha256,
    "HS384": hashlib.sha384,
    "HS512": hashlib.sha512,
}
_ALGORITHMS = tuple(_DIGESTS)
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode(segment: str) -> bytes:
    """``segment``'s bytes if it is canonical unpadded base64url, else ``ValueError``."""
    if _BASE64URL.fullmatch(segment) is None or len(segment) % 4 == 1:
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    if _encode(data) != segment:
        raise ValueError("not canonical base64url")
    return data


def _json_object(segment: str) -> dict[str, Any] | None:
    value = json.loads(_decode(segment))
    return value if isinstance(value, dict) else None


class JwtSigner:
    """Signs and verifies compact JWTs with a shared secret (HS256 by default)."""

    def __init__(self, secret: str | bytes, *, algorithm: str = "HS256") -> None:
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}")
        if len(secret) < 32:
            raise ValueError("an HMAC secret needs at least 32 bytes")
        self._key = secret.encode() if isinstance(secret, str) else bytes(secret)
        self._digest = _DIGESTS[algorithm]
        self._algorithm = algorithm
        self._header = _encode(self._json({"alg": algorithm, "typ": "JWT"}))

    @property
    def algorithm(self) -> str:
        return self._algorithm

    @staticmethod
    def _json(value: Mapping[str, Any]) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def _mac(self, signing_input: str) -> bytes:
        return hmac.new(self._key, signing_input.encode("ascii"), self._digest).digest()

    def sign(self, claims: Mapping[str, Any]) -> str:
        signing_input = f"{self._header}.{_encode(self._json(claims))}"
        return f"{signing_input}.{_encode(self._mac(signing_input))}"

    def verify(self, token: str) -> dict[str, Any]:
        claims = self._verified(token) if isinstance(token, str) else None
        if claims is None:
            raise Unauthenticated("invalid token")
        return claims

    def _verified(self, token: str) -> dict[str, Any] | None:
        """The claims, or ``None``. The MAC is checked before any JSON is parsed: nothing
        a forger wrote reaches the parser."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        header_segment, payload_segment, signature_segment = parts
        try:
            signature = _decode(signature_segment)
            if not hmac.compare_digest(signature, self._mac(f"{header_segment}.{payload_segment}")):
                return None
            header = _json_object(header_segment)
            if header is None or header.get("alg") != self._algorithm or "crit" in header:
                return None
            return _json_object(payload_segment)
        except ValueError:  # not base64url, not UTF-8, not JSON
            return None
