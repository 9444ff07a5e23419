"""Password policy (``--enable-strong-password``), with the reference's exact messages."""

from __future__ import annotations

__all__ = ["MAX_LENGTH", "MIN_LENGTH", "password_problem"]

MIN_LENGTH = 6
MAX_LENGTH = 36

LENGTH_MESSAGE = "password must be of minimum 6 characters and maximum 36 characters"
STRONG_MESSAGE = (
    "password is not valid. It needs to be at least 6 characters long and contain at least "
    "one number, one uppercase letter, one lowercase letter and one special character"
)


def password_problem(password: str, *, strong: bool) -> str | None:
    """The policy message the password violates, or ``None`` when it is acceptable."""
    if not MIN_LENGTH <= len(password) <= MAX_LENGTH:
        return LENGTH_MESSAGE
    if not strong:
        return None
    has_upper = any(c.isupper() for c in password)
    has_lower = any(c.islower() for c in password)
    has_digit = any(c.isdigit() for c in password)
    has_special = any(not c.isalnum() for c in password)
    if has_upper and has_lower and has_digit and has_special:
        return None
    return STRONG_MESSAGE
