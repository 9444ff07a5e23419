"""``--apple-client-secret``: Apple's client secret is a short-lived ES256 JWT that the
client signs with a private key from the Apple developer account.

The flag takes either

- ``<team id>:<key id>:<PEM private key>`` (the ``AuthKey_<key id>.p8`` file's text;
  newlines may be written as ``\\n``): bastion signs a fresh secret for every code
  exchange (``iss`` = team id, ``sub`` = ``--apple-client-id``, ``aud`` = Apple, five
  minutes), or
- an already signed secret (a JWT, as Authorizer takes it), sent as it is; it stops
  working when it expires (at most six months).
"""

from __future__ import annotations

import dataclasses

__all__ = ["APPLE_SECRET_TTL", "AppleSigningKey", "parse_apple_secret"]

#: Lifetime of each signed client secret.
APPLE_SECRET_TTL = 300


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AppleSigningKey:
    team_id: str
    key_id: str
    private_key_pem: str = dataclasses.field(repr=False)


def parse_apple_secret(value: str) -> AppleSigningKey | str:
    """The signing key, or the value itself when it is a ready-made secret (a JWT).
    Raises ValueError for anything else, without echoing the value."""
    if "-----BEGIN" in value:
        team_id, _, rest = value.partition(":")
        key_id, _, pem = rest.partition(":")
        pem = pem.replace("\\n", "\n").strip()
        if not team_id.strip() or not key_id.strip() or not pem.startswith("-----BEGIN"):
            raise ValueError("--apple-client-secret: expected <team id>:<key id>:<PEM private key>")
        return AppleSigningKey(team_id=team_id.strip(), key_id=key_id.strip(), private_key_pem=pem)
    if value.count(".") == 2:
        return value
    raise ValueError(
        "--apple-client-secret: expected <team id>:<key id>:<PEM private key> or a signed JWT"
    )
