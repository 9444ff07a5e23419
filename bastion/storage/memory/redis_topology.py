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

from collections.abc import Callable
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.sentinel import Sentinel

from bastion.core.redis_url import parse_redis_url

__all__ = ["redis_client"]


class CountingSentinel(Sentinel):
    """redis-py's Sentinel manager, counting how often the master it discovers changed:
    the failovers this process has seen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.master_changes = 0
        self._last: dict[str, Any] = {}

    def discover_master(self, service_name: str) -> Any:
        address = super().discover_master(service_name)
        last = self._last.get(service_name)
        if last is not None and address != last:
            self.master_changes += 1
        self._last[service_name] = address
        return address


def redis_client(
    url: str, *, pool_size: int, timeout: float, retry: Any
) -> tuple[redis.Redis, Callable[[], int]]:
    """A client for ``url``'s topology (a RedisCluster is a ``redis.Redis`` in duck type:
    every command the memory store uses has the same signature), and a count of the
    failovers it has followed (always 0 but through Sentinel)."""
    topology = parse_redis_url(url)
    common: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": retry,
    }
    if topology.kind == "single":
        return redis.Redis.from_url(url, max_connections=pool_size, **common), _none
    auth = {"username": topology.username, "password": topology.password}
    if topology.kind == "sentinel":
        sentinel = CountingSentinel(
            list(topology.hosts),
            sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout},
            ssl=topology.tls,
            **common,
        )
        client = sentinel.master_for(
            topology.service, db=topology.db, max_connections=pool_size, **auth
        )
        return client, lambda: sentinel.master_changes
    cluster: Any = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in topology.hosts],
        ssl=topology.tls,
        max_connections=pool_size,
        **auth,
        **common,
    )
    return cluster, _none


def _none() -> int:
    return 0
