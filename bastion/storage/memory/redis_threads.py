"""redis-py's sync client behind the memory store's client interface, called from worker
threads: how Redis Cluster is reached.

Cluster routing (the slot map, MOVED/ASK redirections, multi-key commands split by slot)
is redis-py's, not ours (issue 21 forbids a home-made one); its client blocks, so each call
pays a hand-off to a worker thread, behind a ``trio.CapacityLimiter`` as large as its
connection pool. One server and Sentinel use the trio client of
:mod:`storage.memory.resp` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis
import trio
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.retry import Retry

from bastion.core.redis_url import RedisTopology
from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory.resp import Arg, Command

__all__ = ["ThreadedRedis", "cluster_client"]

_SCAN_BATCH = 500


def retry() -> Retry:
    """Two more tries after a connection error, 50 ms then 100 ms later."""
    return Retry(ExponentialBackoff(cap=0.5, base=0.05), 2)


def cluster_client(topology: RedisTopology, *, pool_size: int, timeout: float) -> RedisCluster:
    """redis-py's cluster client for a ``redis+cluster://`` topology."""
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in topology.hosts],
        ssl=topology.tls,
        max_connections=pool_size,
        username=topology.username,
        password=topology.password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=retry(),
    )


class ThreadedRedis:
    """A redis-py client (``redis.Redis`` or ``RedisCluster``: one duck type for every
    command used here), each call in a worker thread."""

    def __init__(self, client: redis.Redis | RedisCluster, *, pool_size: int) -> None:
        self._client: Any = client
        self._cluster = isinstance(client, RedisCluster)
        self._limiter = trio.CapacityLimiter(pool_size)
        self._scripts: dict[str, Script] = {}
        self._unavailable = 0

    async def execute(self, *args: Arg) -> Any:
        return await self._call(lambda: self._client.execute_command(*args))

    async def ping(self) -> None:
        # A thread stuck on a dead server is left behind when the caller gives up.
        await self._call(self._client.ping, abandon=True)

    async def pipeline(
        self,
        commands: Sequence[Command],
        script: tuple[str, Sequence[str], Sequence[Arg]] | None = None,
    ) -> list[Any]:
        def work() -> list[Any]:
            # One round trip (per node, on a cluster); no MULTI: each command stands alone.
            pipe = self._client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = pipe.execute()
            return replies

        replies: list[Any] = await self._call(work) if commands else []
        if script is not None:
            # A second round trip: redis-py's cluster pipeline takes no scripts.
            replies.append(await self.script(*script))
        return replies

    async def script(self, body: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        script = self._scripts.get(body)
        if script is None:
            script = self._scripts[body] = self._client.register_script(body)
        return await self._call(lambda: script(keys=list(keys), args=list(args)))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        # A cluster reads slot by slot: these keys never need one atomic read.
        read = self._client.mget_nonatomic if self._cluster else self._client.mget
        values: list[bytes | None] = await self._call(lambda: read(keys))
        return values

    async def delete(self, keys: Sequence[str]) -> int:
        deleted: int = await self._call(lambda: self._client.delete(*keys))
        return deleted

    async def delete_matching(self, pattern: str) -> int:
        def work() -> int:
            deleted = 0
            batch: list[bytes] = []
            for key in self._client.scan_iter(match=pattern, count=_SCAN_BATCH):
                batch.append(key)
                if len(batch) >= _SCAN_BATCH:
                    deleted += self._client.unlink(*batch)
                    batch = []
            if batch:
                deleted += self._client.unlink(*batch)
            return deleted

        deleted: int = await self._call(work)
        return deleted

    def statistics(self) -> dict[str, int]:
        return {"unavailable": self._unavailable, "failovers": 0}

    async def aclose(self) -> None:
        await trio.to_thread.run_sync(self._client.close)

    async def _call(self, fn: Callable[[], Any], abandon: bool = False) -> Any:
        try:
            return await trio.to_thread.run_sync(
                fn, limiter=self._limiter, abandon_on_cancel=abandon
            )
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self._unavailable += 1
            raise StorageUnavailable("cannot reach the redis memory store") from e
