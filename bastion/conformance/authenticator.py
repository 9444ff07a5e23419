"""A software WebAuthn authenticator (the passkey rows, and bastion's tests): ES256 keys
from ``cryptography``, CBOR from ``cbor2``, "none" attestation, answers as the browser's
``PublicKeyCredential`` JSON.

Every knob a test needs to make a response wrong is a parameter: the origin the client
data names, the rp id whose hash the authenticator data carries, the counter, the user
verification and backup flags.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

__all__ = ["SoftAuthenticator", "b64url"]

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class SoftAuthenticator:
    origin: str
    rp_id: str
    #: the credential may be synced (BE) and is backed up (BS)
    backup_eligible: bool = False
    backed_up: bool = False
    counter: int = 0
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    credential_id: bytes = field(default_factory=lambda: os.urandom(32))
    user_handle: bytes = b""

    def _cose_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps(
            {
                1: 2,
                3: -7,
                -1: 1,
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )

    def _flags(self, uv: bool, attested: bool) -> int:
        flags = UP | (UV if uv else 0)
        flags |= (BE if self.backup_eligible else 0) | (BS if self.backed_up else 0)
        return flags | (AT if attested else 0)

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": origin or self.origin}
        return json.dumps(data, separators=(",", ":")).encode()

    def create(
        self,
        options_json: str,
        *,
        origin: str | None = None,
        rp_id: str | None = None,
        uv: bool = True,
    ) -> str:
        """The registration response to ``navigator.credentials.create(options)``."""
        options = json.loads(options_json)
        self.user_handle = _unb64url(options["user"]["id"])
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        attested = (
            b"\0" * 16
            + struct.pack(">H", len(self.credential_id))
            + self.credential_id
            + self._cose_key()
        )
        auth_data = (
            rp_hash + bytes([self._flags(uv, True)]) + struct.pack(">I", self.counter) + attested
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"], origin)
        return json.dumps(
            {
                "id": b64url(self.credential_id),
                "rawId": b64url(self.credential_id),
                "type": "public-key",
                "response": {
                    "clientDataJSON": b64url(client_data),
                    "attestationObject": b64url(attestation),
                    "transports": ["internal", "hybrid"],
                },
                "clientExtensionResults": {},
                "authenticatorAttachment": "platform",
            }
        )

    def get(
        self,
        options_json: str,
        *,
        origin: str | None = None,
        rp_id: str | None = None,
        uv: bool = True,
        counter: int | None = None,
    ) -> str:
        """The sign-in response to ``navigator.credentials.get(options)``; the counter moves
        on by one unless given."""
        options: dict[str, Any] = json.loads(options_json)
        self.counter = self.counter + 1 if counter is None else counter
        rp_hash = hashlib.sha256((rp_id or self.rp_id).encode()).digest()
        auth_data = rp_hash + bytes([self._flags(uv, False)]) + struct.pack(">I", self.counter)
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return json.dumps(
            {
                "id": b64url(self.credential_id),
                "rawId": b64url(self.credential_id),
                "type": "public-key",
                "response": {
                    "clientDataJSON": b64url(client_data),
                    "authenticatorData": b64url(auth_data),
                    "signature": b64url(signature),
                    "userHandle": b64url(self.user_handle),
                },
                "clientExtensionResults": {},
                "authenticatorAttachment": "platform",
            }
        )
