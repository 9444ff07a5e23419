"""The memory store rides through a Sentinel failover: the master is killed, the
sentinels promote the replica, and the same store object (no restart, no new URL) serves
again from the new master, with every write the replica had received still there. Calls
made during the switch fail with StorageUnavailable (never another error, never a wrong
answer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory import RedisMemoryStore
from tests.redis_topologies import SentinelSet, sentinel_set


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelSet]:
    with sentinel_set(tmp_path) as found:
        yield found


async def test_a_sentinel_failover_keeps_the_store_serving(sentinels: SentinelSet) -> None:
    store = RedisMemoryStore(sentinels.url(), pool_size=4, timeout=2)
    try:
        written = {f"before:{i}": str(i).encode() for i in range(50)}
        for key, value in written.items():
            await store.set(key, value, ttl=600)
        # Every acknowledged write has reached the replica before the master dies.
        master = sentinels.master.client()
        master.wait(1, 5000)
        old_port = sentinels.current_master_port()
        sentinels.master.kill()

        failures: list[BaseException] = []
        with trio.fail_after(60):
            while True:
                try:
                    await store.set("after", b"1", ttl=600)
                    break
                except StorageUnavailable as exc:
                    failures.append(exc)
                    await trio.sleep(0.2)
        assert sentinels.current_master_port() == sentinels.replica.port != old_port
        assert await store.get("after") == b"1"
        values = await store.get_many(*written)
        assert values == list(written.values())
        # Only the documented failure during the switch.
        assert all(isinstance(f, StorageUnavailable) for f in failures)
    finally:
        await store.aclose()
