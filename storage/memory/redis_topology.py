"""One redis-py client for each topology a ``--memory-store-url`` can name.

- ``redis://`` / ``rediss://``: one server (redis-py's own URL form, ``/db`` included).
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`` (and
  ``rediss+sentinel://``): the sentinels are asked for the master of ``service``; after
  a failover the pool's next connection goes to the promoted one. The password (if any)
  is the master's; the sentinels themselves are reached without one.
- ``redis+cluster://[user:password@]host:port[,host:port...]`` (and
  ``rediss+cluster://``): Redis Cluster through the startup nodes; redis-py follows the
  slot map and its MOVED/ASK redirections.

All of it is redis-py's own Sentinel and Cluster support; nothing here routes a key.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

from core.redis_url import parse_redis_url

__all__ = ["redis_client"]


def redis_client(url: str, *, pool_size: int, timeout: float, retry: Any) -> redis.Redis:
    """A client for ``url``'s topology (a RedisCluster is a ``redis.Redis`` in duck type:
    every command the memory store uses has the same signature)."""
    topology = parse_redis_url(url)
    common: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
    }
    if topology.kind == "single":
        return redis.Redis.from_url(url, max_connections=pool_size, **common)
    auth = {"username": topology.username, "password": topology.password}
    if topology.kind == "sentinel":
        sentinel = Sentinel(
            list(topology.hosts),
            sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout},
            ssl=topology.tls,
            **common,
        )
        return sentinel.master_for(
            topology.service, db=topology.db, max_connections=pool_size, **auth
        )
    cluster: Any = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in topology.hosts],
        ssl=topology.tls,
        max_connections=pool_size,
        **auth,
        **common,
    )
    return cluster  # type: ignore[no-any-return]
