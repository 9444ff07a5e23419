"""RFC 7662 token introspection: the response for a token we issued.

Whether the token is live (signature, claims, still in the session store) is decided by
the caller; this module only shapes the answer, so an inactive token says nothing more
than ``{"active": false}`` (§2.2: no hint why).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["INACTIVE", "active_response"]

INACTIVE: dict[str, Any] = {"active": False}


def active_response(claims: Mapping[str, Any], *, client_id: str) -> dict[str, Any]:
    """``{"active": true, ...}`` with the §2.2 members our tokens carry."""
    scope = claims.get("scope")
    body: dict[str, Any] = {"active": True, "client_id": client_id}
    if isinstance(scope, list):
        body["scope"] = " ".join(str(s) for s in scope)
    for name in ("exp", "iat", "sub", "aud", "iss", "token_type"):
        if name in claims:
            body[name] = claims[name]
    return body
