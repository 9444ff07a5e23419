"""update_profile's multi-factor part: carries out :mod:`core.auth.mfa_settings`.

:func:`prepare_mfa_change` runs before the profile's transaction: it plans the change,
checks the fresh second factor and draws new recovery codes. Everything it writes goes
into that ONE transaction (:meth:`PreparedMfaChange.apply`): the factor is consumed there
by compare-and-set (a TOTP step recorded, a recovery code removed), so a code raced by
another request, or a profile change refused later in the transaction, leaves nothing
half-written and nothing consumed.

The "recently passed a challenge" proof is a memory-store key per session family,
``mfa_fresh:<sid>``, set by ``verify_otp`` and living :data:`FRESH_FACTOR_WINDOW` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

from bastion.core.auth import otp, totp
from bastion.core.auth.mfa_settings import (
    FACTOR_REQUIRED,
    FRESH_FACTOR_WINDOW,
    NO_AUTHENTICATOR,
    MfaChange,
    plan_mfa_change,
)
from bastion.core.auth.totp import Authenticator
from bastion.core.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from bastion.service.auth.requests import UpdateProfileRequest
from bastion.service.mfa_challenges import guesses_key
from bastion.service.system import SystemRandom
from bastion.storage import admin_users
from bastion.storage import authenticators as rows

if TYPE_CHECKING:
    from bastion.core.auth.user import User
    from bastion.service.auth.parts import AuthParts
    from bastion.storage.memory import MemoryStore

__all__ = ["PreparedMfaChange", "has_fresh_factor", "mark_fresh_factor", "prepare_mfa_change"]

INVALID_OTP = "invalid otp"
TOO_MANY_ATTEMPTS = "too many attempts, please try again later"

SqlStep = Callable[[sa.Connection], None]


def _fresh_key(sid: str) -> str:
    return f"mfa_fresh:{sid}"


async def mark_fresh_factor(memory: MemoryStore, sid: str) -> None:
    """The session family ``sid`` was just completed by a second factor."""
    await memory.set(_fresh_key(sid), b"1", ttl=FRESH_FACTOR_WINDOW)


async def has_fresh_factor(memory: MemoryStore, sid: str) -> bool:
    """Did a second factor complete the session family ``sid`` within the window?"""
    return await memory.get(_fresh_key(sid)) is not None


@dataclass(frozen=True, slots=True)
class PreparedMfaChange:
    change: MfaChange
    #: consumes the fresh factor (compare-and-set), None when none is consumed
    proof: SqlStep | None
    #: the new recovery codes, shown once, when regenerating
    recovery_codes: tuple[str, ...]

    @property
    def audit_actions(self) -> tuple[str, ...]:
        actions = []
        if self.change.enabled is True:
            actions.append("user.mfa_enabled")
        if self.change.enabled is False:
            actions.append("user.mfa_disabled")
        if self.change.regenerate_recovery_codes:
            actions.append("user.recovery_codes_regenerated")
        return tuple(actions)

    def apply(self, conn: sa.Connection, user_id: str, now: int) -> None:
        if self.proof is not None:
            self.proof(conn)
        if self.change.remove_authenticator:
            admin_users.delete_authenticators(conn, user_id)
        if self.change.regenerate_recovery_codes:
            digests = tuple(totp.recovery_digest(code) for code in self.recovery_codes)
            if not rows.replace_recovery_codes(conn, user_id, digests, now=now):
                raise FailedPrecondition(NO_AUTHENTICATOR)


async def prepare_mfa_change(
    account: AuthParts, sid: str, user: User, request: UpdateProfileRequest
) -> PreparedMfaChange | None:
    """The request's MFA change, its factor checked; None when it asks for none."""
    enable = request.is_multi_factor_auth_enabled
    regenerate = request.regenerate_recovery_codes is True
    if enable is None and not regenerate:
        return None
    authenticator = await account.authenticators.load(user.id)
    verified = authenticator is not None and authenticator.verified
    policy = account.mfa_policy
    change = plan_mfa_change(
        enable=enable,
        regenerate=regenerate,
        user_mfa_on=bool(user.is_multi_factor_auth_enabled),
        has_verified_authenticator=verified,
        mfa_enabled=policy.enable_mfa,
        mfa_enforced=policy.enforce_mfa,
        any_method=policy.any_method,
    )
    proof = None
    if change.needs_fresh_factor:
        memory = account.storage.memory
        if not await has_fresh_factor(memory, sid):
            proof = await _factor_proof(
                memory, user.id, authenticator, request.otp, account.clock.now()
            )
    codes = totp.new_recovery_codes(SystemRandom()) if change.regenerate_recovery_codes else ()
    return PreparedMfaChange(change=change, proof=proof, recovery_codes=codes)


def _consumed(ok: bool) -> None:
    if not ok:  # another request used this code (or step) first
        raise InvalidArgument(INVALID_OTP)


async def _factor_proof(
    memory: MemoryStore,
    user_id: str,
    authenticator: Authenticator | None,
    code: str,
    now: float,
) -> SqlStep:
    """The step consuming ``code`` (an authenticator or recovery code). Each code is
    counted before it is compared, against the user's one second-factor guess budget
    (shared with login challenges); a right code gives its attempt back."""
    if not code:
        raise InvalidArgument(FACTOR_REQUIRED)
    budget = guesses_key(user_id)
    if await memory.incr(budget, ttl=otp.USER_GUESS_WINDOW) > otp.USER_GUESS_BUDGET:
        await memory.incr(budget, -1)
        raise ResourceExhausted(TOO_MANY_ATTEMPTS, retry_after=otp.USER_GUESS_WINDOW)
    if authenticator is None or not authenticator.verified:
        raise InvalidArgument(INVALID_OTP)
    step = totp.matching_step(
        authenticator.secret, code, now=now, last_used_step=authenticator.last_used_step
    )
    stamp = int(now)
    if step is not None:
        await memory.incr(budget, -1)
        return lambda conn: _consumed(rows.record_step(conn, user_id, step, now=stamp))
    digest = totp.find_recovery_code(code, authenticator.recovery_digests)
    if digest is None:
        raise InvalidArgument(INVALID_OTP)
    await memory.incr(budget, -1)
    return lambda conn: _consumed(rows.use_recovery_code(conn, user_id, digest, now=stamp))
