"""One conformance suite for every memory store: in-process, Redis, and SQL on each database."""

from __future__ import annotations

import uuid

import pytest
import trio

from bastion.storage.memory import MemoryStore
from tests.storage.helpers import eventually

SHORT_TTL = 0.3


def new_key(label: str = "k") -> str:
    return f"test:{label}:{uuid.uuid4().hex}"


async def test_set_get_overwrite(memory_store: MemoryStore) -> None:
    key = new_key()
    assert await memory_store.get(key) is None
    await memory_store.set(key, b"one")
    assert await memory_store.get(key) == b"one"
    await memory_store.set(key, b"\x00two\xff")
    assert await memory_store.get(key) == b"\x00two\xff"


async def test_set_if_absent(memory_store: MemoryStore) -> None:
    key = new_key()
    assert await memory_store.set_if_absent(key, b"first") is True
    assert await memory_store.set_if_absent(key, b"second") is False
    assert await memory_store.get(key) == b"first"


async def test_delete_counts_existing_keys(memory_store: MemoryStore) -> None:
    a, b, missing = new_key(), new_key(), new_key()
    await memory_store.set(a, b"1")
    await memory_store.set(b, b"2")
    assert await memory_store.delete(a, b, missing) == 2
    assert await memory_store.get(a) is None
    assert await memory_store.get(b) is None
    assert await memory_store.delete() == 0


async def test_take_consumes_once(memory_store: MemoryStore) -> None:
    key = new_key()
    await memory_store.set(key, b"code")
    assert await memory_store.take(key) == b"code"
    assert await memory_store.take(key) is None
    assert await memory_store.get(key) is None


@pytest.mark.parametrize("takers", [2, 20])
async def test_concurrent_take_has_one_winner(memory_store: MemoryStore, takers: int) -> None:
    key = new_key()
    await memory_store.set(key, b"one-time")
    results: list[bytes | None] = []

    async def take() -> None:
        results.append(await memory_store.take(key))

    async with trio.open_nursery() as nursery:
        for _ in range(takers):
            nursery.start_soon(take)
    assert len(results) == takers
    assert [r for r in results if r is not None] == [b"one-time"]


async def test_concurrent_incr_loses_nothing(memory_store: MemoryStore) -> None:
    key = new_key("counter")
    seen: list[int] = []

    async def incr() -> None:
        seen.append(await memory_store.incr(key, ttl=60))

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(incr)
    assert sorted(seen) == list(range(1, 51))
    assert await memory_store.get(key) == b"50"
    assert await memory_store.incr(key, amount=-10) == 40


async def test_incr_ttl_applies_when_created(memory_store: MemoryStore) -> None:
    expiring, lasting = new_key(), new_key()
    await memory_store.set(lasting, b"7")
    assert await memory_store.incr(lasting, ttl=SHORT_TTL) == 8
    assert await memory_store.incr(expiring, ttl=SHORT_TTL) == 1
    assert await eventually(lambda: _absent(memory_store, expiring))
    # Created without a TTL, so the TTL of a later incr does not apply to it.
    assert await memory_store.get(lasting) == b"8"
    assert await memory_store.incr(expiring) == 1


async def test_keys_expire(memory_store: MemoryStore) -> None:
    short, forever = new_key(), new_key()
    await memory_store.set(forever, b"stays")
    await memory_store.set(short, b"soon gone", ttl=SHORT_TTL)
    assert await eventually(lambda: _absent(memory_store, short))
    assert await memory_store.get(forever) == b"stays"
    # An expired key is absent for every operation.
    assert await memory_store.take(short) is None
    assert await memory_store.delete(short) == 0
    assert await memory_store.set_if_absent(short, b"again", ttl=SHORT_TTL) is True
    assert await eventually(lambda: _absent(memory_store, short))


async def test_delete_prefix(memory_store: MemoryStore) -> None:
    base = new_key("prefix")
    await memory_store.set(f"{base}:a", b"1")
    await memory_store.set(f"{base}:b", b"2", ttl=60)
    await memory_store.set(f"{base}_x", b"3")  # '_' is a LIKE wildcard: must not match ':'
    await memory_store.set(f"{base}:%*?[x]", b"4")
    await memory_store.set(f"{base.upper()}:a", b"5")  # another case, another key
    assert await memory_store.delete_prefix(f"{base}:") == 3
    assert await memory_store.get(f"{base}:a") is None
    assert await memory_store.get(f"{base}_x") == b"3"
    assert await memory_store.get(f"{base.upper()}:a") == b"5"
    assert await memory_store.delete_prefix(f"{base}:%") == 0
    assert await memory_store.delete_prefix(base) == 1


async def test_token_bucket_allows_burst_then_refuses(memory_store: MemoryStore) -> None:
    key, other = new_key("bucket"), new_key("bucket")
    for _ in range(3):
        assert await memory_store.token_bucket(key, rate=0.1, burst=3) == (True, 0.0)
    allowed, retry_after = await memory_store.token_bucket(key, rate=0.1, burst=3)
    assert allowed is False
    assert 0 < retry_after <= 10
    assert (await memory_store.token_bucket(other, rate=0.1, burst=3))[0] is True
    allowed, retry_after = await memory_store.token_bucket(other, rate=0.1, burst=3, cost=3)
    assert allowed is False
    assert retry_after > 0


async def test_token_bucket_refills(memory_store: MemoryStore) -> None:
    """Spent, then allowed again: refusal itself is covered with a slow rate above."""
    key = new_key("bucket")
    assert (await memory_store.token_bucket(key, rate=20, burst=1))[0] is True

    async def allowed_again() -> bool:
        return (await memory_store.token_bucket(key, rate=20, burst=1))[0]

    assert await eventually(allowed_again)


async def test_token_bucket_state_expires_when_idle(memory_store: MemoryStore) -> None:
    key = new_key("bucket")
    assert (await memory_store.token_bucket(key, rate=20, burst=2))[0] is True

    async def gone() -> bool:
        # Fails while the key holds the bucket's state, whatever the store keeps it as.
        return await memory_store.set_if_absent(key, b"taken", ttl=60)

    assert await eventually(gone)
    assert await memory_store.get(key) == b"taken"


async def test_token_bucket_rejects_nonsense(memory_store: MemoryStore) -> None:
    key = new_key("bucket")
    with pytest.raises(ValueError, match="cost"):
        await memory_store.token_bucket(key, rate=1, burst=2, cost=3)
    with pytest.raises(ValueError, match="rate"):
        await memory_store.token_bucket(key, rate=0, burst=2)
    with pytest.raises(ValueError, match="ttl"):
        await memory_store.set(key, b"x", ttl=0)


async def test_ping(memory_store: MemoryStore) -> None:
    await memory_store.ping()


async def _absent(store: MemoryStore, key: str) -> bool:
    return await store.get(key) is None


async def test_get_many_in_order_with_absent_keys(memory_store: MemoryStore) -> None:
    a, b, missing = new_key(), new_key(), new_key()
    await memory_store.set(a, b"1")
    await memory_store.set(b, b"\x00two")
    assert await memory_store.get_many(b, missing, a) == [b"\x00two", None, b"1"]
    assert await memory_store.get_many(a, a) == [b"1", b"1"]
    assert await memory_store.get_many() == []
    await memory_store.incr(missing, 3)
    assert await memory_store.get_many(missing) == [b"3"]


async def test_set_many_writes_each_entry_with_its_ttl(memory_store: MemoryStore) -> None:
    lasting, brief, existing = new_key(), new_key(), new_key()
    await memory_store.set(existing, b"old")
    await memory_store.set_many(
        [(lasting, b"L", None), (brief, b"B", SHORT_TTL), (existing, b"new", 60)]
    )
    assert await memory_store.get_many(lasting, brief, existing) == [b"L", b"B", b"new"]
    assert await eventually(lambda: _absent(memory_store, brief))
    assert await memory_store.get_many(lasting, brief, existing) == [b"L", None, b"new"]
    await memory_store.set_many([])


async def test_set_many_refuses_a_bad_ttl_before_writing(memory_store: MemoryStore) -> None:
    first = new_key()
    with pytest.raises(ValueError, match="ttl must be positive"):
        await memory_store.set_many([(first, b"1", 10), (new_key(), b"2", 0)])
    assert await memory_store.get(first) is None


async def test_index_add_list_remove(memory_store: MemoryStore) -> None:
    key = new_key("index")
    assert await memory_store.index_members(key) == []
    await memory_store.index_add(key, "b", 60)
    await memory_store.index_add(key, "a", 60)
    await memory_store.index_add(key, "a", 60)
    assert await memory_store.index_members(key) == ["a", "b"]
    await memory_store.index_remove(key, "a", "missing")
    assert await memory_store.index_members(key) == ["b"]
    await memory_store.index_remove(key, "b")
    assert await memory_store.index_members(key) == []


async def test_index_members_expire_one_by_one(memory_store: MemoryStore) -> None:
    key = new_key("index")
    await memory_store.index_add(key, "short", SHORT_TTL)
    await memory_store.index_add(key, "long", 60)
    assert await memory_store.index_members(key) == ["long", "short"]

    async def only_long() -> bool:
        return await memory_store.index_members(key) == ["long"]

    assert await eventually(only_long)
    await memory_store.index_add(key, "long", SHORT_TTL)  # renewed: its new time counts

    async def empty() -> bool:
        return await memory_store.index_members(key) == []

    assert await eventually(empty)


async def test_set_many_with_an_index_entry(memory_store: MemoryStore) -> None:
    key, index = new_key(), new_key("index")
    await memory_store.index_add(index, "older", 60)
    await memory_store.set_many([(key, b"v", 60)], index=(index, "sid", SHORT_TTL))
    assert await memory_store.get(key) == b"v"
    assert await memory_store.index_members(index) == ["older", "sid"]

    async def only_older() -> bool:
        return await memory_store.index_members(index) == ["older"]

    assert await eventually(only_older)
    await memory_store.set_many([], index=(index, "alone", 60))
    assert await memory_store.index_members(index) == ["alone", "older"]
    with pytest.raises(ValueError, match="ttl must be positive"):
        await memory_store.set_many([(new_key(), b"1", 10)], index=(index, "bad", 0))
    assert await memory_store.index_members(index) == ["alone", "older"]
