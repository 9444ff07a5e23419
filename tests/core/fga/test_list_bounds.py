"""ListObjects and ListUsers bounded as OpenFGA bounds them: a deadline after which the
answer is what was confirmed so far (no error), a result bound that 0 lifts, and objects
found one at a time (what a stream sends as it goes)."""

from __future__ import annotations

from bastion.core.fga.check import check
from bastion.core.fga.list_objects import ObjectSearch, list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.request import Deadline, RequestOptions
from tests.core.fga.support import world

MODEL = """type user
type group
  relations
    define member: [user, group#member]
type doc
  relations
    define blocked: [user]
    define viewer: [user, group#member]
    define can_view: viewer but not blocked
"""
TUPLES = (
    *(f"group:g{i}#member@group:g{i + 1}#member" for i in range(10)),
    "group:g10#member@user:anne",
    *(f"doc:{i}#viewer@group:g{i % 11}#member" for i in range(60)),
    *(f"doc:{i}#viewer@user:u{i}" for i in range(60)),
    "doc:7#blocked@user:anne",
)


class Clock:
    """A clock that moves one tick each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += 1.0
        return self.now


def test_no_deadline_for_zero_seconds() -> None:
    assert Deadline.after(0, Clock()) is None
    deadline = Deadline.after(3, lambda: 10.0)
    assert deadline is not None
    assert deadline.at == 13.0


def test_list_objects_answers_what_it_confirmed_when_the_deadline_passes() -> None:
    ts, store = world(MODEL, *TUPLES)
    full = list_objects(ts, store, "doc", "can_view", "user:anne")
    assert (len(full.items), full.timed_out) == (59, False)
    clock = Clock()
    options = RequestOptions(deadline=Deadline(clock() + 25, clock))
    partial = list_objects(ts, store, "doc", "can_view", "user:anne", options)
    assert partial.timed_out
    assert partial.truncated
    assert 0 < len(partial.items) < len(full.items)
    assert set(partial.items) <= set(full.items)
    assert all(check(ts, store, obj, "can_view", "user:anne") for obj in partial.items)


def test_objects_are_yielded_as_they_are_confirmed() -> None:
    """The first object comes out before the walk has gone further: once the deadline
    passes right after it, nothing more is found."""
    ts, store = world(MODEL, *TUPLES)
    expired = False
    deadline = Deadline(1.0, lambda: 2.0 if expired else 0.0)
    search = ObjectSearch(
        ts, store, "doc", "viewer", "user:anne", RequestOptions(deadline=deadline)
    )
    found = iter(search)
    first = next(found)
    assert check(ts, store, first, "viewer", "user:anne")
    expired = True
    assert list(found) == []
    assert search.timed_out


def test_a_bound_of_zero_lists_everything() -> None:
    ts, store = world(MODEL, *TUPLES)
    bounded = list_objects(ts, store, "doc", "viewer", "user:anne", RequestOptions(max_results=5))
    assert (len(bounded.items), bounded.truncated) == (5, True)
    unbounded = list_objects(ts, store, "doc", "viewer", "user:anne", RequestOptions(max_results=0))
    assert (len(unbounded.items), unbounded.truncated) == (60, False)
    users = list_users(
        ts, store, "doc:3", "viewer", UserFilter("user"), RequestOptions(max_results=0)
    )
    assert users.items == ("user:anne", "user:u3")


def test_list_users_answers_the_users_it_met_that_check_grants() -> None:
    """The deadline passes in the nested groups: the direct viewers met before are the
    answer, each confirmed by Check; anne, at the end of the groups, is not reached."""
    direct = [f"doc:x#viewer@user:w{i}" for i in range(40)]
    ts, store = world(MODEL, *direct, "doc:x#viewer@group:g0#member", *TUPLES)
    full = list_users(ts, store, "doc:x", "viewer", UserFilter("user"))
    assert (len(full.items), "user:anne" in full.items, full.timed_out) == (41, True, False)
    clock = Clock()
    options = RequestOptions(deadline=Deadline(clock() + 5, clock))
    partial = list_users(ts, store, "doc:x", "viewer", UserFilter("user"), options)
    assert (partial.timed_out, partial.truncated) == (True, True)
    assert set(partial.items) == set(full.items) - {"user:anne"}
    assert all(check(ts, store, "doc:x", "viewer", user) for user in partial.items)
