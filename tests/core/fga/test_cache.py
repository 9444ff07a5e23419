"""The cross-request Check cache: hits, revision scoping, bypass, eviction."""

from __future__ import annotations

from bastion.core.fga.cache import CheckCache
from bastion.core.fga.check import check
from bastion.core.fga.request import RequestOptions
from tests.core.fga.support import key, world

MODEL = """type user
type group
  relations
    define member: [user, group#member]
type doc
  relations
    define viewer: [group#member]
"""


def test_cached_answers_are_reused_until_the_revision_changes() -> None:
    ts, store = world(MODEL, "doc:1#viewer@group:a#member", "group:a#member@user:anne")
    cache = CheckCache()
    options = RequestOptions()

    def cached_check(user: str) -> bool:
        scoped = cache.scoped(("m1", store.revision), options)
        return check(ts, store, "doc:1", "viewer", user, options, cache=scoped)

    assert cached_check("user:anne") is True
    first = cache.statistics()
    assert first.entries > 0
    assert cached_check("user:anne") is True
    assert cache.statistics().hits == first.hits + 1
    store.delete(key("group:a#member@user:anne"))
    assert cached_check("user:anne") is False  # new revision, new scope: no stale answer


def test_requests_with_context_or_contextual_tuples_bypass() -> None:
    cache = CheckCache()
    assert cache.scoped("s", RequestOptions(context={"x": 1})) is None
    assert (
        cache.scoped("s", RequestOptions(contextual_tuples=[key("doc:1#viewer@group:a#member")]))
        is None
    )
    assert cache.scoped("s", RequestOptions()) is not None


def test_least_recently_used_entries_are_evicted() -> None:
    ts, store = world(MODEL, *(f"group:{i}#member@user:anne" for i in range(5)))
    cache = CheckCache(max_entries=2)
    options = RequestOptions()
    for i in range(5):
        check(
            ts, store, f"group:{i}", "member", "user:anne", options, cache=cache.scoped(0, options)
        )
    assert cache.statistics().entries == 2


def test_a_hit_keeps_an_entry_and_the_oldest_go_a_sixteenth_at_a_time() -> None:
    ts, store = world(MODEL, *(f"group:{i}#member@user:anne" for i in range(64)))
    cache = CheckCache(max_entries=32)
    options = RequestOptions()

    def cached_check(i: int) -> None:
        obj = f"group:{i}"
        assert check(ts, store, obj, "member", "user:anne", options, cache=cache.scoped(0, options))

    for i in range(32):
        cached_check(i)
    assert cache.statistics().entries == 32
    cached_check(0)  # a hit: group 0 is now the most recently used
    hits = cache.statistics().hits
    cached_check(32)  # one over: the two (32 // 16) least recently used go, 1 and 2
    assert cache.statistics().entries == 31
    cached_check(0)
    assert cache.statistics().hits == hits + 1
    cached_check(1)
    assert cache.statistics().hits == hits + 1  # evicted: evaluated again
    cached_check(3)
    assert cache.statistics().hits == hits + 2
