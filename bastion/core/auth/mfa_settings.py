"""A user's own multi-factor settings, changed through ``update_profile``: the rules.

What a request may change
  - ``is_multi_factor_auth_enabled: true`` turns MFA on, when some method can be used
    (else FailedPrecondition, the reference's message). Turning MFA on needs no second
    factor: it only ever adds one. With authenticator apps on, the next login enrols.
  - ``is_multi_factor_auth_enabled: false`` turns MFA off, unless ``--enforce-mfa`` is in
    force (FailedPrecondition). The user's authenticator and its recovery codes are
    removed with it, so turning MFA on later enrols a new authenticator.
  - ``regenerate_recovery_codes: true`` replaces the recovery codes of the user's verified
    authenticator (FailedPrecondition without one); the new codes are answered once.
  Both changes at once contradict each other (InvalidArgument).

A *fresh* second factor is required to turn MFA off (when it is on for the user and
``--enable-mfa`` is set; otherwise nothing is protected by it) and to regenerate recovery
codes. Fresh means either of:
  - in the same request, ``otp``: a current authenticator code (now +-1 step, a step later
    than the last one accepted, recorded so it cannot be used again) or an unused recovery
    code (consumed); wrong codes are InvalidArgument "invalid otp"; every code is counted
    BEFORE it is compared (so parallel guesses cannot slip past the limit) against the
    user's one second-factor guess budget (:data:`core.auth.otp.USER_GUESS_BUDGET` wrong
    codes per :data:`core.auth.otp.USER_GUESS_WINDOW`, shared with login challenges);
  - the caller's session was completed by ``verify_otp`` (any method) at most
    :data:`FRESH_FACTOR_WINDOW` seconds ago; this is how users without an authenticator
    app (email or SMS codes) prove themselves: log in again, then change the setting.
With neither, InvalidArgument :data:`FACTOR_REQUIRED`.
"""

from __future__ import annotations

import dataclasses

from bastion.core.errors import FailedPrecondition, InvalidArgument

__all__ = [
    "FACTOR_REQUIRED",
    "FRESH_FACTOR_WINDOW",
    "MfaChange",
    "plan_mfa_change",
]

#: A session completed by ``verify_otp`` counts as a fresh second factor this long: 5 min.
FRESH_FACTOR_WINDOW = 5 * 60
#: ``otp`` values compared per user and window (right or wrong), then ResourceExhausted.

FACTOR_REQUIRED = (
    "a fresh second factor is required: send otp (an authenticator or recovery code), "
    "or log in again with your second factor first"
)
NO_METHODS = "cannot enable multi factor authentication as all mfa services are disabled"
ENFORCED = "cannot disable multi factor authentication as it is enforced by organization"
NO_AUTHENTICATOR = "no authenticator app is enrolled"
CONTRADICTION = "cannot regenerate recovery codes while turning multi factor authentication off"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MfaChange:
    """What an update_profile request does to the user's multi-factor settings."""

    #: the user's new ``is_multi_factor_auth_enabled``, ``None`` for unchanged
    enabled: bool | None = None
    #: remove the authenticator and its recovery codes
    remove_authenticator: bool = False
    regenerate_recovery_codes: bool = False
    #: a fresh second factor must be shown first
    needs_fresh_factor: bool = False

    @property
    def changes_anything(self) -> bool:
        return self.enabled is not None or self.regenerate_recovery_codes


def plan_mfa_change(
    *,
    enable: bool | None,
    regenerate: bool,
    user_mfa_on: bool,
    has_verified_authenticator: bool,
    mfa_enabled: bool,
    mfa_enforced: bool,
    any_method: bool,
) -> MfaChange:
    """The change ``enable`` / ``regenerate`` ask for, or the error refusing it.

    ``mfa_enabled`` / ``mfa_enforced`` are ``--enable-mfa`` / ``--enforce-mfa``;
    ``any_method`` says some second factor can actually be used."""
    if enable is False and regenerate:
        raise InvalidArgument(CONTRADICTION)
    if enable is True and not any_method:
        raise FailedPrecondition(NO_METHODS)
    if enable is False and mfa_enforced and mfa_enabled:
        raise FailedPrecondition(ENFORCED)
    if regenerate and not has_verified_authenticator:
        raise FailedPrecondition(NO_AUTHENTICATOR)
    protected = mfa_enabled and (user_mfa_on or mfa_enforced)
    return MfaChange(
        enabled=enable,
        remove_authenticator=enable is False,
        regenerate_recovery_codes=regenerate,
        needs_fresh_factor=regenerate or (enable is False and protected),
    )
