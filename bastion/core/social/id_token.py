"""Checks on a provider's ID token once its signature has been verified against the
provider's published keys (OpenID Connect Core 3.1.3.7)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CLOCK_SKEW", "id_token_problem"]

#: Seconds of clock difference tolerated on ``exp`` and ``iat``.
CLOCK_SKEW = 120


def id_token_problem(
    claims: Mapping[str, Any],
    *,
    issuer: str,
    client_id: str,
    nonce: str | None,
    now: int,
) -> str | None:
    """What is wrong with ``claims``, or None: issuer, audience (and ``azp`` with several
    audiences), expiry, issue time and the nonce we sent must all match."""
    if claims.get("iss") != issuer:
        return "unexpected issuer"
    aud = claims.get("aud")
    audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if client_id not in audiences:
        return "unexpected audience"
    if len(audiences) > 1 and claims.get("azp") != client_id:
        return "unexpected authorized party"
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int | float) or exp + CLOCK_SKEW < now:
        return "expired"
    if isinstance(iat, int | float) and iat - CLOCK_SKEW > now:
        return "issued in the future"
    if nonce is not None and claims.get("nonce") != nonce:
        return "nonce mismatch"
    if not claims.get("sub"):
        return "no subject"
    return None
