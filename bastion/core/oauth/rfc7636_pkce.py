"""RFC 7636 Proof Key for Code Exchange.

Only ``S256`` is accepted: ``plain`` protects nothing once the authorize request is seen
(the challenge IS the verifier), and every current client library speaks S256 (OAuth 2.1
drops ``plain`` for the same reason).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

__all__ = ["METHODS", "challenge_is_valid", "s256", "verifier_is_valid", "verifier_matches"]

#: the ``code_challenge_method`` values we accept (discovery lists exactly these)
METHODS: tuple[str, ...] = ("S256",)
#: RFC 7636 §4.1: 43 to 128 unreserved characters; an S256 challenge is 43 of them
_UNRESERVED = re.compile(r"[A-Za-z0-9\-._~]{43,128}")


def verifier_is_valid(verifier: str) -> bool:
    return _UNRESERVED.fullmatch(verifier) is not None


def challenge_is_valid(challenge: str) -> bool:
    return _UNRESERVED.fullmatch(challenge) is not None


def s256(verifier: str) -> str:
    """BASE64URL(SHA256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def verifier_matches(verifier: str, challenge: str, method: str) -> bool:
    """Constant-time check of a token request's verifier against the stored challenge."""
    if method not in METHODS or not verifier_is_valid(verifier):
        return False
    return hmac.compare_digest(s256(verifier).encode(), challenge.encode())
