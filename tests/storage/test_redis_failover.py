"""The memory store rides through a Sentinel failover: the master is killed, the
sentinels promote the replica, and the same store object (no restart, no new URL) serves
again from the new master, with every write the replica had received still there. Calls
made during the switch fail with StorageUnavailable (never another error, never a wrong
answer). A manual failover is also followed on a TLS-only set (``rediss+sentinel``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory import RedisMemoryStore
from tests.redis_topologies import SERVICE, SentinelSet, Tls, sentinel_set


@pytest.fixture
def sentinels(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SentinelSet]:
    """A plain set, or a TLS-only one when parametrized with "tls"."""
    tls = None
    if getattr(request, "param", "plain") == "tls":
        tls = Tls.self_signed(tmp_path / "certs", "redis")
    with sentinel_set(tmp_path, tls) as found:
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
        assert store.statistics()["failovers"] == 1
    finally:
        await store.aclose()


@pytest.mark.parametrize("sentinels", ["plain", "tls"], indirect=True)
async def test_a_demoted_master_sends_the_store_to_the_promoted_one(
    sentinels: SentinelSet,
) -> None:
    """A manual failover: the old master lives on as a replica (it answers writes with
    READONLY, or drops its clients); the store asks the sentinels again and writes to the
    new master, with the connections it keeps to the old one dropped."""
    store = RedisMemoryStore(sentinels.url(), pool_size=4, timeout=2)
    try:
        await store.set("before", b"1", ttl=600)
        old_port = sentinels.current_master_port()
        sentinels.sentinels[0].client().execute_command("SENTINEL", "FAILOVER", SERVICE)

        def demoted() -> bool:
            # Until the old master has turned replica, writes may still land on it.
            role = sentinels.master.client().info("replication")["role"]
            return sentinels.current_master_port() != old_port and role == "slave"

        for _ in range(600):  # a minute at most
            if demoted():
                break
            await trio.sleep(0.1)
        assert demoted(), "the sentinels never demoted the old master"
        with trio.fail_after(60):
            while True:
                try:
                    await store.set("after", b"2", ttl=600)
                    break
                except StorageUnavailable:
                    await trio.sleep(0.2)
        new_master = sentinels.replica.client()
        assert new_master.get("after") == b"2"
        assert await store.get("before") == b"1"
        assert store.statistics()["failovers"] == 1
    finally:
        await store.aclose()
