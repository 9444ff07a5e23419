"""Apple's client secret: an ES256 JWT signed with the developer account's key."""

from __future__ import annotations

from joserfc import jwt
from joserfc.jwk import ECKey

from bastion.core.social.apple import APPLE_SECRET_TTL, AppleSigningKey

__all__ = ["apple_client_secret"]


def apple_client_secret(key: AppleSigningKey, *, client_id: str, audience: str, now: int) -> str:
    """A fresh secret: ``iss`` team id, ``sub`` client id, ``aud`` Apple, five minutes,
    ``kid`` the key id. (A ready-made secret from the flag is sent as it is.)"""
    claims = {
        "iss": key.team_id,
        "iat": now,
        "exp": now + APPLE_SECRET_TTL,
        "aud": audience,
        "sub": client_id,
    }
    private = ECKey.import_key(key.private_key_pem)
    return jwt.encode({"alg": "ES256", "kid": key.key_id}, claims, private, algorithms=["ES256"])
