"""Which roles a request may ask for (``--roles``, ``--default-roles``, ``--protected-roles``).

Each function returns the granted roles, or ``None`` when the request must be refused
with InvalidArgument "invalid roles". An empty request means "the defaults".
"""

from __future__ import annotations

from collections.abc import Sequence

from bastion.core.auth.policy import AuthPolicy

__all__ = ["INVALID_ROLES", "login_roles", "magic_link_roles", "signup_roles"]

INVALID_ROLES = "invalid roles"


def signup_roles(requested: Sequence[str], policy: AuthPolicy) -> tuple[str, ...] | None:
    """A new account asks only for configured roles that are not protected."""
    if not requested:
        return policy.default_roles
    allowed = set(policy.roles) - set(policy.protected_roles)
    if not set(requested) <= allowed:
        return None
    return _unique(requested)


def login_roles(
    requested: Sequence[str], user_roles: Sequence[str], policy: AuthPolicy
) -> tuple[str, ...] | None:
    """Requested roles must all be held by the user; no request means ``--default-roles``,
    whatever the user holds (kept reference behaviour §13.3: ``allowed_roles`` in the
    tokens still tells a resource server what the user really has)."""
    if not requested:
        return policy.default_roles
    if not set(requested) <= set(user_roles):
        return None
    return _unique(requested)


def magic_link_roles(
    requested: Sequence[str], user_roles: Sequence[str] | None, policy: AuthPolicy
) -> tuple[str, ...] | None:
    """The roles a magic-link account ends up holding.

    A new account (``user_roles is None``) follows the signup rule. An existing one keeps
    its roles and gains requested configured roles it lacks, but never a protected one.
    """
    if user_roles is None:
        return signup_roles(requested, policy)
    missing = [r for r in requested if r not in user_roles]
    if any(r in policy.protected_roles or r not in policy.roles for r in missing):
        return None
    return _unique([*user_roles, *missing])


def _unique(roles: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(roles))
