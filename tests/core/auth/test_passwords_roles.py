"""Password policy and role rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bastion.core.auth.passwords import LENGTH_MESSAGE, STRONG_MESSAGE, password_problem
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.roles import login_roles, magic_link_roles, signup_roles

POLICY = AuthPolicy(
    url="https://auth.example.com",
    client_id="c",
    roles=("user", "editor", "admin"),
    default_roles=("user",),
    protected_roles=("admin",),
)


@pytest.mark.parametrize(
    ("password", "strong", "problem"),
    [
        ("Ab1!x", True, LENGTH_MESSAGE),
        ("Ab1!xy", True, None),
        ("A" * 20 + "b1!" + "c" * 13, True, None),  # 36 characters
        ("A" * 20 + "b1!" + "c" * 14, True, LENGTH_MESSAGE),  # 37
        ("abcdef", True, STRONG_MESSAGE),
        ("ABCDE1!", True, STRONG_MESSAGE),
        ("abcDEF!", True, STRONG_MESSAGE),
        ("abcDE12", True, STRONG_MESSAGE),
        ("abcdef", False, None),
        ("abc", False, LENGTH_MESSAGE),
        ("Pässwört1!", True, None),
    ],
)
def test_password_policy(password: str, strong: bool, problem: str | None) -> None:
    assert password_problem(password, strong=strong) == problem


def test_messages_are_the_reference_strings() -> None:
    assert LENGTH_MESSAGE == "password must be of minimum 6 characters and maximum 36 characters"
    assert STRONG_MESSAGE == (
        "password is not valid. It needs to be at least 6 characters long and contain at least "
        "one number, one uppercase letter, one lowercase letter and one special character"
    )


@given(st.text(max_size=50))
def test_strong_acceptance_implies_weak_acceptance(password: str) -> None:
    if password_problem(password, strong=True) is None:
        assert password_problem(password, strong=False) is None
    if password_problem(password, strong=False) is not None:
        assert password_problem(password, strong=False) == LENGTH_MESSAGE


def test_signup_roles() -> None:
    assert signup_roles((), POLICY) == ("user",)
    assert signup_roles(("editor", "user", "editor"), POLICY) == ("editor", "user")
    assert signup_roles(("admin",), POLICY) is None  # protected
    assert signup_roles(("ghost",), POLICY) is None  # not configured


def test_login_roles_default_to_default_roles_whatever_the_user_holds() -> None:
    assert login_roles((), ("editor",), POLICY) == ("user",)
    assert login_roles(("editor",), ("editor", "user"), POLICY) == ("editor",)
    assert login_roles(("admin",), ("editor", "user"), POLICY) is None
    assert login_roles(("admin",), ("admin",), POLICY) == ("admin",)


def test_magic_link_roles() -> None:
    assert magic_link_roles((), None, POLICY) == ("user",)
    assert magic_link_roles(("admin",), None, POLICY) is None
    assert magic_link_roles(("editor",), ("user",), POLICY) == ("user", "editor")
    assert magic_link_roles(("admin",), ("user",), POLICY) is None
    assert magic_link_roles(("admin",), ("admin", "user"), POLICY) == ("admin", "user")
    assert magic_link_roles(("ghost",), ("user",), POLICY) is None


@given(st.lists(st.sampled_from(["user", "editor", "admin", "ghost"]), max_size=4))
def test_granted_signup_roles_are_always_allowed(requested: list[str]) -> None:
    granted = signup_roles(requested, POLICY)
    if granted is not None:
        assert set(granted) <= set(POLICY.roles) - set(POLICY.protected_roles)
