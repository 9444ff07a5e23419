"""Evaluation in rounds over a store read on demand (core.fga.on_demand): the read cache's
byte bound and LRU order, the reads a change touches, rounds that batch a depth's reads,
and the check cache never keeping a speculative outcome."""

from __future__ import annotations

from typing import Any

from bastion.core.fga.cache import CheckCache
from bastion.core.fga.check import Checker, check
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.on_demand import (
    ReadCache,
    RoundReader,
    Speculation,
    answer_from,
    evaluate_from,
    keys_touched,
    whole_object,
)
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from tests.core.fga.support import NESTED, key, world


def answer(n: int) -> tuple[TupleKey, ...]:
    return (key(f"doc:{n}#viewer@user:{n}"),)


def test_the_cache_is_bounded_by_bytes_least_recently_used_out() -> None:
    cache = ReadCache(20_000)
    for n in range(200):
        cache.put(("s", "read", f"doc:{n}", "viewer"), answer(n))
        if n == 10:
            assert cache.get(("s", "read", "doc:0", "viewer")) == answer(0)  # used: kept
    stats = cache.statistics()
    assert 0 < stats.bytes <= 20_000
    assert stats.evictions > 0
    assert len(cache) < 200
    assert cache.get(("s", "read", "doc:199", "viewer")) == answer(199)
    assert cache.get(("s", "read", "doc:1", "viewer")) is None  # the oldest went first
    assert cache.get(("s", "read", "doc:0", "viewer")) is None  # used once, long ago


def test_peeking_leaves_the_use_order_and_the_counts_alone() -> None:
    cache = ReadCache(20_000)
    for n in range(3):
        cache.put(("s", "read", f"doc:{n}", "viewer"), answer(n))
    assert cache.peek(("s", "read", "doc:0", "viewer")) == answer(0)
    assert cache.peek(("s", "read", "doc:9", "viewer")) is None
    assert (cache.hits, cache.misses) == (0, 0)
    for n in range(3, 200):  # doc:0 was only peeked at: the oldest, the first out
        cache.put(("s", "read", f"doc:{n}", "viewer"), answer(n))
    assert cache.peek(("s", "read", "doc:0", "viewer")) is None


def test_an_answer_too_large_for_the_cache_is_not_kept() -> None:
    cache = ReadCache(8_000)
    members = tuple(key(f"group:big#member@user:{n}") for n in range(100))
    cache.put(("s", "read", "group:big", "member"), members)
    assert cache.get(("s", "read", "group:big", "member")) is None
    assert cache.bytes == 0


def test_discarding_the_keys_a_change_touches_leaves_every_answer_exact() -> None:
    tuples = [key("doc:1#viewer@user:a"), key("doc:1#viewer@group:g#member")]
    store = MemoryTupleReader(tuples)
    cache = ReadCache(1 << 20)
    reads: list[tuple[Any, ...]] = [
        ("s", "read", "doc:1", "viewer"),
        ("s", "read_exact", "doc:1", "viewer", "user:a"),
        ("s", "read_exact", "doc:1", "viewer", "user:b"),
        ("s", "read_usersets", "doc:1", "viewer"),
        ("s", "read_by_user", "user:a", "doc"),
        ("s", "read_by_user", "user:b", "doc"),
        ("s", "read_by_user", "group:g#member", "doc"),
        whole_object("s", "doc:1", 2),
    ]
    changes = [
        ("write", key("doc:1#viewer@user:b")),
        ("delete", key("doc:1#viewer@user:a")),
        ("write", key("doc:1#viewer@group:h#member")),
        ("delete", key("doc:1#viewer@group:g#member")),
    ]
    for operation, changed in changes:
        for read in reads:
            cache.put(read, answer_from(store, read))
        store.write(changed) if operation == "write" else store.delete(changed)
        for touched in keys_touched("s", changed, 2):
            cache.discard(touched)
        for read in reads:
            cached = cache.get(read)
            assert cached is None or cached == answer_from(store, read), (operation, read)


def test_a_round_asks_every_read_of_one_depth_together() -> None:
    ts, store = world(
        NESTED,
        "doc:1#parent@folder:b",
        "folder:b#parent@folder:a",
        "folder:a#viewer@group:g#member",
        "group:g#member@user:anne",
    )
    speculation = Speculation(
        lambda reader: check(ts, reader, "doc:1", "viewer", "user:anne"), lambda _: None
    )
    batches = []
    while reads := speculation.step():
        batches.append(reads)
        for read in reads:
            speculation.answer(read, answer_from(store, read))
    assert speculation.result is True
    # doc:1, its folder, that folder's parent, the group: a round per depth...
    assert len(batches) <= 5
    # ...and more reads than rounds: a depth's reads (the user, the usersets, the parent)
    # come in one batch.
    assert sum(map(len, batches)) > 2 * len(batches)


def test_rounds_answer_as_the_store_and_reuse_the_cache() -> None:
    ts, store = world(
        NESTED,
        "doc:1#parent@folder:b",
        "doc:2#parent@folder:a",
        "folder:b#parent@folder:a",
        "folder:a#viewer@group:g#member",
        "group:g#member@user:anne",
    )
    cache = ReadCache(1 << 20)
    for _ in range(2):
        for user in ("user:anne", "user:bob"):
            found = evaluate_from(
                lambda r, u=user: list_objects(ts, r, "doc", "viewer", u).items, store, cache
            )
            assert found == list_objects(ts, store, "doc", "viewer", user).items
    stats = cache.statistics()
    assert stats.hits > stats.misses  # the second pass read nothing from the store


def test_a_speculative_outcome_never_reaches_the_check_cache() -> None:
    model = """type user
type doc
  relations
    define blocked: [user]
    define viewer: [user] but not blocked
"""
    ts, store = world(model, "doc:1#viewer@user:anne", "doc:1#blocked@user:anne")
    reads = ReadCache(1 << 20)
    # Warm: the viewer tuple is cached, the block is not: the first round sees anne allowed.
    viewer = ("s", "read_exact", "doc:1", "viewer", "user:anne")
    reads.put(viewer, answer_from(store, viewer))
    checks = CheckCache()
    options = RequestOptions()

    def run(reader: RoundReader) -> bool:
        request = RequestContext(ts, reader, options)
        scoped = checks.scoped("scope", options, reader.misses)
        return Checker(request, scoped).check("doc:1", "viewer", "user:anne")

    assert evaluate_from(run, store, reads, "s") is False
    assert evaluate_from(run, store, reads, "s") is False  # from the check cache, still right
    assert checks.statistics().hits >= 1


def test_an_object_read_whole_answers_every_user_of_it() -> None:
    ts, store = world(
        NESTED,
        "doc:1#parent@folder:a",
        "doc:1#viewer@user:anne",
        "folder:a#viewer@group:g#member",
        "group:g#member@user:bob",
    )
    cache = ReadCache(1 << 20)
    for user, allowed in (("user:anne", True), ("user:bob", True), ("user:carl", False)):
        got = evaluate_from(
            lambda r, u=user: check(ts, r, "doc:1", "viewer", u), store, cache, "s", 10
        )
        assert got is allowed, user
    # One entry per object, whoever asked: no read by user, relation or userset.
    kinds = {entry[1] for entry in cache._entries}
    assert kinds == {"read_object"}
    assert len(cache) == 3  # doc:1, folder:a, group:g


def test_an_object_past_the_limit_is_read_by_relation_and_user() -> None:
    members = [f"group:g#member@user:u{n}" for n in range(5)]
    ts, store = world(NESTED, "doc:1#viewer@group:g#member", *members)
    cache = ReadCache(1 << 20)

    def allowed(user: str) -> bool:
        return evaluate_from(lambda r: check(ts, r, "doc:1", "viewer", user), store, cache, "s", 3)

    assert allowed("user:u4")
    assert not allowed("user:nobody")
    group = whole_object("s", "group:g", 3)
    assert len(cache.get(group) or ()) == 4  # the overflow, kept to say so
    assert cache.get(("s", "read_exact", "group:g", "member", "user:u4")) is not None


def test_rounds_over_whole_objects_answer_as_the_store() -> None:
    ts, store = world(
        NESTED,
        "doc:1#parent@folder:b",
        "doc:2#parent@folder:a",
        "doc:2#viewer@user:bob",
        "folder:b#parent@folder:a",
        "folder:a#viewer@group:g#member",
        "group:g#member@user:anne",
        "group:g#member@group:h#member",
        "group:h#member@user:carl",
    )
    for limit in (0, 1, 2, 100):
        cache = ReadCache(1 << 20)
        for user in ("user:anne", "user:bob", "user:carl", "user:dan"):
            found = evaluate_from(
                lambda r, u=user: list_objects(ts, r, "doc", "viewer", u).items,
                store,
                cache,
                "s",
                limit,
            )
            assert found == list_objects(ts, store, "doc", "viewer", user).items, (limit, user)
            for doc in ("doc:1", "doc:2"):
                got = evaluate_from(
                    lambda r, u=user, d=doc: check(ts, r, d, "viewer", u), store, cache, "s", limit
                )
                assert got == check(ts, store, doc, "viewer", user), (limit, user, doc)
