"""OpenID Connect Core §5.3 / §5.4: the UserInfo response, filtered by the token's scope.

``sub`` always; ``profile`` adds the name, picture, gender, birthdate and update time;
``email`` the address and whether it is verified; ``phone`` the number and whether it is
verified. Nothing else about the user leaves through this endpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bastion.core.auth.user import User

__all__ = ["SCOPE_CLAIMS", "userinfo_claims"]

SCOPE_CLAIMS: dict[str, tuple[str, ...]] = {
    "profile": (
        "given_name",
        "family_name",
        "middle_name",
        "nickname",
        "preferred_username",
        "picture",
        "gender",
        "birthdate",
        "updated_at",
    ),
    "email": ("email", "email_verified"),
    "phone": ("phone_number", "phone_number_verified"),
}


def userinfo_claims(user: User, scope: Sequence[str]) -> dict[str, Any]:
    profile = user.to_api_dict()
    claims: dict[str, Any] = {"sub": user.id}
    for name in scope:
        for claim in SCOPE_CLAIMS.get(name, ()):
            value = profile.get(claim)
            if value is not None:
                claims[claim] = value
    return claims
