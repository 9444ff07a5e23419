"""TypeSystem.tuple_problem: its answers, and the bound on the answers it keeps."""

from __future__ import annotations

import pytest

from bastion.core.fga import typesystem
from tests.core.fga.support import key, world

MODEL = """type user
type doc
  relations
    define viewer: [user]
"""


def test_the_kept_answers_are_bounded_and_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(typesystem, "VALIDITY_CACHE_ENTRIES", 8)
    ts, _ = world(MODEL)
    for n in range(50):
        assert ts.tuple_problem(key(f"doc:{n}#viewer@user:u{n}")) is None
        assert ts.tuple_problem(key(f"doc:{n}#viewer@doc:{n}")) is not None
        assert len(ts._valid_cache) <= 8
    # After many starts over, answers are the same as the first time.
    assert ts.tuple_problem(key("doc:0#viewer@user:u0")) is None
    assert ts.tuple_problem(key("doc:0#owner@user:u0")) == "relation 'doc#owner' not found"


WIDER = """type user
type group
  relations
    define member: [user, user:*, group#member]
type doc
  relations
    define parent: [doc]
    define viewer: [user, group#member] or viewer from parent
"""


@pytest.mark.parametrize(
    ("valid", "malformed", "problem"),
    [
        ("doc:1#viewer@user:anne", "doc:a b#viewer@user:anne", "invalid object 'doc:a b'"),
        ("doc:1#viewer@user:anne", "doc:1#viewer@user:an\tne", "invalid user 'user:an\tne'"),
        ("doc:1#viewer@user:anne", "doc:x:y#viewer@user:anne", "invalid object 'doc:x:y'"),
        ("doc:1#viewer@user:anne", "doc:*#viewer@user:anne", "invalid object 'doc:*'"),
        ("group:g#member@user:*", "group:g#member@user:*#member", "invalid user 'user:*#member'"),
        (
            "doc:1#viewer@group:g#member",
            "doc:1#viewer@group:g#member#x",
            "invalid user 'group:g#member#x'",
        ),
    ],
)
def test_a_shape_found_valid_does_not_pass_a_malformed_tuple(
    valid: str, malformed: str, problem: str
) -> None:
    """A tuple of a shape found valid before is valid only if its ids are well formed:
    the answer is the one a new type system gives."""
    ts, _ = world(WIDER)
    assert ts.tuple_problem(key(valid)) is None
    assert ts.tuple_problem(key(malformed)) == problem
    assert world(WIDER)[0].tuple_problem(key(malformed)) == problem


def test_the_shapes_found_valid_are_kept_and_no_others() -> None:
    ts, _ = world(WIDER)
    for n in range(20):
        assert ts.tuple_problem(key(f"doc:{n}#parent@doc:{n + 1}")) is None
        assert ts.tuple_problem(key(f"doc:{n}#viewer@group:g{n}#member")) is None
        assert ts.tuple_problem(key(f"doc:{n}#parent@group:g{n}#member")) == (
            "tupleset relation 'parent' only admits objects"
        )
        assert ts.tuple_problem(key(f"doc:{n}#parent@user:u{n}")) == (
            f"type restrictions of 'doc#parent' do not admit 'user:u{n}'"
        )
    assert ts._valid_shapes == {
        ("doc", "parent", "doc", "", False, ""),
        ("doc", "viewer", "group", "member", False, ""),
    }
