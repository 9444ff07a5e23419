"""ListObjects, ListUsers and Expand: results, limits, errors, tree shape."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.expand import expand
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.tuples import TupleKey, TupleReader
from tests.core.fga.support import key, world

MODEL = """type user
type group
  relations
    define member: [user, group#member]
type folder
  relations
    define viewer: [user, user:*]
type doc
  relations
    define parent: [folder]
    define blocked: [user]
    define viewer: [user, user:*, group#member] or viewer from parent
    define can_view: viewer but not blocked
"""


def test_list_objects_follows_usersets_ttu_and_wildcards() -> None:
    ts, store = world(
        MODEL,
        "group:eng#member@user:anne",
        "doc:1#viewer@group:eng#member",
        "folder:f#viewer@user:*",
        "doc:2#parent@folder:f",
        "doc:3#viewer@user:bob",
        "doc:4#blocked@user:anne",
        "doc:4#viewer@user:anne",
    )
    result = list_objects(ts, store, "doc", "viewer", "user:anne")
    assert sorted(result.items) == ["doc:1", "doc:2", "doc:4"]
    assert result.truncated is False
    assert sorted(list_objects(ts, store, "doc", "can_view", "user:anne").items) == [
        "doc:1",
        "doc:2",
    ]
    assert list_objects(ts, store, "doc", "viewer", "group:eng#member").items == ("doc:1",)


def test_list_objects_reports_truncation_instead_of_cutting_silently() -> None:
    ts, store = world(MODEL, *(f"doc:{i}#viewer@user:anne" for i in range(5)))
    limited = list_objects(ts, store, "doc", "viewer", "user:anne", RequestOptions(max_results=3))
    assert len(limited.items) == 3
    assert limited.truncated is True
    exact = list_objects(ts, store, "doc", "viewer", "user:anne", RequestOptions(max_results=5))
    assert len(exact.items) == 5
    assert exact.truncated is False


@pytest.mark.parametrize(
    ("object_type", "relation", "user", "code"),
    [
        ("ghost", "viewer", "user:anne", ErrorCode.TYPE_NOT_FOUND),
        ("doc", "ghost", "user:anne", ErrorCode.RELATION_NOT_FOUND),
        ("doc", "viewer", "ghost:anne", ErrorCode.VALIDATION_ERROR),
    ],
)
def test_list_objects_validation_codes(
    object_type: str, relation: str, user: str, code: ErrorCode
) -> None:
    ts, store = world(MODEL)
    with pytest.raises(FgaError) as info:
        list_objects(ts, store, object_type, relation, user)
    assert info.value.fga_code == code


def test_list_objects_includes_contextual_objects() -> None:
    ts, store = world(MODEL)
    options = RequestOptions(contextual_tuples=[key("doc:9#viewer@user:anne")])
    assert list_objects(ts, store, "doc", "viewer", "user:anne", options).items == ("doc:9",)


def test_list_users_wildcard_exclusion_and_usersets() -> None:
    ts, store = world(
        MODEL,
        "doc:1#viewer@user:*",
        "doc:1#blocked@user:bob",
        "doc:1#viewer@group:eng#member",
        "group:eng#member@user:anne",
        "group:eng#member@group:ops#member",
    )
    users = list_users(ts, store, "doc:1", "can_view", UserFilter.parse("user"))
    assert users.items == ("user:*", "user:anne")
    groups = list_users(ts, store, "doc:1", "viewer", UserFilter.parse("group#member"))
    assert groups.items == ("group:eng#member", "group:ops#member")
    self_member = list_users(ts, store, "group:eng", "member", UserFilter.parse("group#member"))
    assert self_member.items == ("group:eng#member", "group:ops#member")


def test_list_users_truncates_and_validates() -> None:
    ts, store = world(MODEL, *(f"doc:1#viewer@user:u{i}" for i in range(4)))
    limited = list_users(
        ts, store, "doc:1", "viewer", UserFilter("user"), RequestOptions(max_results=2)
    )
    assert (len(limited.items), limited.truncated) == (2, True)
    for obj, relation, user_filter, code in [
        ("ghost:1", "viewer", UserFilter("user"), ErrorCode.TYPE_NOT_FOUND),
        ("doc:1", "ghost", UserFilter("user"), ErrorCode.RELATION_NOT_FOUND),
        ("doc:1", "viewer", UserFilter("ghost"), ErrorCode.TYPE_NOT_FOUND),
        ("doc:1", "viewer", UserFilter("group", "ghost"), ErrorCode.RELATION_NOT_FOUND),
    ]:
        with pytest.raises(FgaError) as info:
            list_users(ts, store, obj, relation, user_filter)
        assert info.value.fga_code == code


def test_expand_returns_one_level_usersettree() -> None:
    ts, store = world(
        MODEL,
        "doc:1#viewer@user:bob",
        "doc:1#viewer@user:anne",
        "doc:1#viewer@group:eng#member",
        "doc:1#parent@folder:f",
        "doc:1#parent@folder:f",
    )
    tree = expand(ts, store, "doc:1", "viewer")
    assert tree == {
        "tree": {
            "root": {
                "name": "doc:1#viewer",
                "union": {
                    "nodes": [
                        {
                            "name": "doc:1#viewer",
                            "leaf": {
                                "users": {"users": ["group:eng#member", "user:anne", "user:bob"]}
                            },
                        },
                        {
                            "name": "doc:1#viewer",
                            "leaf": {
                                "tupleToUserset": {
                                    "tupleset": "doc:1#parent",
                                    "computed": [{"userset": "folder:f#viewer"}],
                                }
                            },
                        },
                    ]
                },
            }
        }
    }
    difference = expand(ts, store, "doc:1", "can_view")["tree"]["root"]["difference"]
    assert difference["base"] == {
        "name": "doc:1#can_view",
        "leaf": {"computed": {"userset": "doc:1#viewer"}},
    }
    with pytest.raises(FgaError) as info:
        expand(ts, store, "doc:1", "")
    assert info.value.fga_code == ErrorCode.INVALID_EXPAND_INPUT
    with pytest.raises(FgaError) as info:
        expand(ts, store, "doc:1", "ghost")
    assert info.value.fga_code == ErrorCode.VALIDATION_ERROR


# Found by the differential test against OpenFGA (seeds 1, 42, 9999): ListUsers follows
# OpenFGA's exclusion algebra, not plain set difference.
ALGEBRA = """type user
type doc
  relations
    define r0: [user, user:*]
    define r1: [user, user:*]
    define either: [user] or r0
    define cut: r0 but not r1
    define cut_or_r1: cut or r1
    define base_cut: either but not r0
    define base_cut_or_r0: base_cut or r0
    define twice: r0 but not base_cut
"""


def test_list_users_subtracted_wildcard_drops_every_base_user() -> None:
    ts, store = world(ALGEBRA, "doc:1#r0@user:anne", "doc:1#r1@user:*")
    assert list_users(ts, store, "doc:1", "cut", UserFilter("user")).items == ()
    # anne can view through r1's wildcard, but OpenFGA lists only the wildcard
    assert list_users(ts, store, "doc:1", "cut_or_r1", UserFilter("user")).items == ("user:*",)


def test_list_users_wildcard_on_both_sides_leaves_only_the_wildcard() -> None:
    ts, store = world(ALGEBRA, "doc:1#r0@user:*", "doc:1#either@user:carl")
    assert list_users(ts, store, "doc:1", "base_cut_or_r0", UserFilter("user")).items == ("user:*",)


def test_list_users_exclusion_of_an_exclusion_lists_the_doubly_subtracted() -> None:
    ts, store = world(ALGEBRA, "doc:1#r0@user:*", "doc:1#either@user:bob")
    assert list_users(ts, store, "doc:1", "twice", UserFilter("user")).items == (
        "user:*",
        "user:bob",
    )


class _Counting:
    """A reader that counts the reads by object (Check's) and by user (the walk's)."""

    def __init__(self, store: TupleReader) -> None:
        self.store = store
        self.by_object = 0

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        self.by_object += 1
        return self.store.read(obj, relation)

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        self.by_object += 1
        return self.store.read_exact(obj, relation, user)

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        self.by_object += 1
        return self.store.read_usersets(obj, relation)

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        return self.store.read_by_user(user, object_type)


UNION = """type user
type group
  relations
    define member: [user, group#member]
type folder
  relations
    define parent: [folder]
    define viewer: [user, group#member] or viewer from parent
type doc
  relations
    define parent: [folder]
    define owner: [user]
    define viewer: [user, group#member] or owner or viewer from parent
"""
CHAIN = [f"folder:f{n + 1}#parent@folder:f{n}" for n in range(30)]


def test_a_union_walk_within_the_depth_limit_is_its_own_proof() -> None:
    ts, store = world(
        UNION,
        "group:g#member@user:anne",
        "group:h#member@group:g#member",
        "folder:f0#viewer@group:h#member",
        *CHAIN,
        "doc:near#parent@folder:f2",
        "doc:own#owner@user:anne",
        "doc:other#owner@user:bob",
    )
    counting = _Counting(store)
    found = list_objects(ts, counting, "doc", "viewer", "user:anne").items
    assert found == ("doc:near", "doc:own")
    assert counting.by_object == 0  # no candidate read again to confirm it
    # A userset as the user, or a model with an exclusion: every candidate is checked.
    checked = _Counting(store)
    assert list_objects(ts, checked, "doc", "viewer", "group:g#member").items == ("doc:near",)
    assert checked.by_object > 0


def test_past_the_depth_limit_less_its_margin_candidates_are_checked() -> None:
    ts, store = world(
        UNION,
        "folder:f0#viewer@user:anne",
        *CHAIN,
        "doc:deep#parent@folder:f30",
        "doc:shallow#parent@folder:f1",
    )
    with pytest.raises(FgaError) as raised:
        list_objects(ts, store, "doc", "viewer", "user:anne")
    assert raised.value.fga_code == ErrorCode.RESOLUTION_TOO_COMPLEX
    deep = list_objects(ts, store, "doc", "viewer", "user:anne", RequestOptions(max_depth=40))
    assert deep.items == ("doc:deep", "doc:shallow")


def test_an_exclusion_on_the_way_keeps_every_candidate_checked() -> None:
    ts, store = world(MODEL, "doc:4#blocked@user:anne", "doc:4#viewer@user:anne")
    counting = _Counting(store)
    assert list_objects(ts, counting, "doc", "can_view", "user:anne").items == ()
    assert counting.by_object > 0
