"""Authenticated encryption of small secrets at rest (TOTP secrets): AES-256-GCM.

The key is derived from a server secret for this one purpose; the 96-bit nonce comes from
the injected :class:`~core.ports.Randomness`; the associated data (the owner's user id)
binds a ciphertext to its row, so a sealed secret copied onto another user does not open.
The sealed form is text: ``v1.`` + base64url(nonce || ciphertext+tag).

During a rotation of the server secret, ``previous`` secrets still open what they sealed;
:meth:`SecretBox.open_current` says when a value needs sealing again under the current key.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from bastion.core.auth.otp import derive_key
from bastion.core.ports import Randomness

__all__ = ["SecretBox", "SecretBoxError"]

_VERSION = "v1."
_NONCE_BYTES = 12
_LABEL = b"bastion/secretbox/v1"


class SecretBoxError(ValueError):
    """A sealed value is damaged, forged, or sealed under another key or owner."""


class SecretBox:
    def __init__(
        self,
        server_secret: str | bytes,
        randomness: Randomness,
        *,
        previous: tuple[str | bytes, ...] = (),
    ) -> None:
        self._aead = AESGCM(derive_key(server_secret, _LABEL))
        self._previous = tuple(AESGCM(derive_key(secret, _LABEL)) for secret in previous)
        self._randomness = randomness

    def seal(self, plaintext: str, *, owner: str) -> str:
        nonce = self._randomness.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), owner.encode())
        return _VERSION + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, sealed: str, *, owner: str) -> str:
        return self.open_current(sealed, owner=owner)[0]

    def open_current(self, sealed: str, *, owner: str) -> tuple[str, bool]:
        """The plaintext, and whether it was sealed under the current key (False: under a
        previous one, so it should be sealed again)."""
        if not sealed.startswith(_VERSION):
            raise SecretBoxError("unknown sealed-secret format")
        body = sealed[len(_VERSION) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise SecretBoxError("sealed secret is not base64url") from None
        if len(raw) <= _NONCE_BYTES:
            raise SecretBoxError("sealed secret is too short")
        for index, aead in enumerate((self._aead, *self._previous)):
            try:
                plain = aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], owner.encode())
            except InvalidTag:
                continue
            return plain.decode(), index == 0
        raise SecretBoxError("sealed secret does not open with this key and owner")
