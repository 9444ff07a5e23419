"""Signing keys for the tests, as the ``--jwt-private-key`` / ``--jwt-public-key`` flags
take them: PKCS#8 and SubjectPublicKeyInfo PEM."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa


def pem_pair(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> tuple[str, str]:
    """(private PEM, public PEM) of ``key``."""
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def rsa_pem_pair() -> tuple[str, str]:
    """A new 2048-bit RSA key's (private PEM, public PEM)."""
    return pem_pair(rsa.generate_private_key(public_exponent=65537, key_size=2048))
