"""``rediss+sentinel://`` and ``rediss+cluster://`` against TLS-only servers of the test's
own (plain ports closed; replication, the cluster bus and the sentinels over TLS): the
memory store reaches the sentinels and the master over TLS, or the cluster's nodes, and
refuses a certificate it was not told to trust. (A failover on a TLS-only set:
``test_redis_failover``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory import RedisMemoryStore
from bastion.storage.memory.redis_topology import redis_client
from tests.redis_topologies import SERVICE, Tls, redis_cluster, sentinel_set


async def refused(url: str) -> StorageUnavailable:
    """The error a store on ``url`` answers a read with."""
    store = RedisMemoryStore(url, pool_size=2, timeout=2)
    try:
        with pytest.raises(StorageUnavailable) as raised:
            await store.get("k")
    finally:
        await store.aclose()
    return raised.value


async def test_rediss_sentinel_checks_the_sentinels_and_the_master(tmp_path: Path) -> None:
    """The servers and the sentinels have certificates of their own: trusting both works,
    trusting either alone is refused where the other one answers."""
    servers = Tls.self_signed(tmp_path / "certs", "servers")
    sentinels_tls = Tls.self_signed(tmp_path / "certs", "sentinels", trust=[servers.cert])
    servers = Tls(servers.cert, servers.key, sentinels_tls.ca)  # each trusts the other
    with sentinel_set(tmp_path, servers, sentinels_tls) as sentinels:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in sentinels.sentinels)
        base = f"rediss+sentinel://{hosts}/{SERVICE}/1"
        store = RedisMemoryStore(f"{base}?ssl_ca_certs={sentinels_tls.ca}", pool_size=2, timeout=2)
        try:
            await store.set("tls", b"yes", ttl=60)
            assert await store.get("tls") == b"yes"
            await store.set_many([("{t}:a", b"1", 60), ("{t}:b", b"2", 60)])
            assert await store.get_many("{t}:a", "{t}:b") == [b"1", b"2"]
        finally:
            await store.aclose()
        master = sentinels.master.client()
        master.select(1)
        assert master.get("tls") == b"yes"

        # The sentinels' certificate only: they answer, the master's handshake fails.
        master_refused = await refused(f"{base}?ssl_ca_certs={sentinels_tls.cert}")
        assert "no sentinel named the master" not in str(master_refused)
        # The servers' only: no sentinel is reached.
        for query in (f"?ssl_ca_certs={servers.cert}", ""):
            sentinels_refused = await refused(base + query)
            assert "no sentinel named the master" in str(sentinels_refused)


async def test_rediss_cluster_talks_tls_and_checks_the_certificate(tmp_path: Path) -> None:
    tls = Tls.self_signed(tmp_path / "certs", "cluster")
    with redis_cluster(tmp_path / "cluster", tls=tls) as cluster:
        store = RedisMemoryStore(cluster.url(), pool_size=4, timeout=2)
        client = redis_client(cluster.url(), pool_size=2, timeout=2)
        try:
            keys = [f"{{user:{n}}}:session" for n in range(20)]  # spread over the nodes
            for n, key in enumerate(keys):
                await store.set(key, str(n).encode(), ttl=60)
            assert await store.get_many(*keys) == [str(n).encode() for n in range(20)]
            replies = await client.pipeline(
                [("SET", "{u}:a", "1"), ("INCR", "{u}:n"), ("INCR", "{u}:n"), ("GET", "{u}:a")]
            )
            assert replies == [True, 1, 2, b"1"]
        finally:
            await store.aclose()
            await client.aclose()
        # Every node took some of the keys: each was reached over TLS.
        assert all(node.client().dbsize() > 0 for node in cluster.nodes)

        await refused(cluster.url().partition("?")[0])
