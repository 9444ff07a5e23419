"""The rules of a user's own MFA changes (core.auth.mfa_settings)."""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.auth.mfa_settings import MfaChange, plan_mfa_change
from bastion.core.errors import FailedPrecondition, InvalidArgument


def plan(**overrides: Any) -> MfaChange:
    args: dict[str, Any] = {
        "enable": None,
        "regenerate": False,
        "user_mfa_on": True,
        "has_verified_authenticator": True,
        "mfa_enabled": True,
        "mfa_enforced": False,
        "any_method": True,
    }
    args.update(overrides)
    return plan_mfa_change(**args)


def test_turning_mfa_on_needs_no_factor_but_a_usable_method() -> None:
    assert plan(enable=True, user_mfa_on=False) == MfaChange(enabled=True)
    with pytest.raises(FailedPrecondition, match="all mfa services are disabled"):
        plan(enable=True, any_method=False)


def test_turning_mfa_off_needs_a_fresh_factor_and_removes_the_authenticator() -> None:
    assert plan(enable=False) == MfaChange(
        enabled=False, remove_authenticator=True, needs_fresh_factor=True
    )


def test_turning_off_what_protects_nothing_needs_no_factor() -> None:
    assert not plan(enable=False, user_mfa_on=False).needs_fresh_factor
    assert not plan(enable=False, mfa_enabled=False).needs_fresh_factor
    assert plan(enable=False, mfa_enabled=False).remove_authenticator


def test_enforced_mfa_cannot_be_turned_off_once_enabled() -> None:
    with pytest.raises(FailedPrecondition, match="enforced by organization"):
        plan(enable=False, mfa_enforced=True)
    # the reference's defaults (enforce on, MFA off) mean no MFA: nothing is enforced
    assert plan(enable=False, mfa_enforced=True, mfa_enabled=False).enabled is False


def test_regenerating_needs_a_verified_authenticator_and_a_fresh_factor() -> None:
    assert plan(regenerate=True) == MfaChange(
        regenerate_recovery_codes=True, needs_fresh_factor=True
    )
    with pytest.raises(FailedPrecondition, match="no authenticator app is enrolled"):
        plan(regenerate=True, has_verified_authenticator=False)


def test_regenerating_while_turning_off_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="cannot regenerate recovery codes"):
        plan(enable=False, regenerate=True)


def test_nothing_asked_changes_nothing() -> None:
    assert not plan().changes_anything
    assert plan(regenerate=True).changes_anything
