"""redis-py's sync client behind the memory store's client interface, called from worker
threads: how Redis Cluster is reached.

Cluster routing (the slot map, MOVED/ASK redirections, multi-key commands split by slot)
is redis-py's, not ours (issue 21 forbids a home-made one); its client blocks, so each call
pays a hand-off to a worker thread, behind a ``trio.CapacityLimiter`` as large as its
connection pool. One server and Sentinel use the trio client of
:mod:`storage.memory.resp` instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import redis
import trio
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException
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
    """redis-py's cluster client for a ``redis+cluster://`` topology (it connects now)."""
    tls: dict[str, Any] = {}
    if topology.tls:
        settings = topology.tls_settings()
        tls = {
            "ssl": True,
            "ssl_cert_reqs": settings.cert_reqs,
            "ssl_check_hostname": settings.check_hostname,
            "ssl_ca_certs": settings.ca_certs,
            "ssl_certfile": settings.certfile,
            "ssl_keyfile": settings.keyfile,
        }
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in topology.hosts],
        **tls,
        max_connections=pool_size,
        username=topology.username,
        password=topology.password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=retry(),
    )


class ThreadedRedis:
    """A redis-py client (``redis.Redis`` or ``RedisCluster``: one duck type for every
    command used here), each call in a worker thread.

    The client is made by ``connect`` on the first call, in its worker thread:
    ``RedisCluster`` reads the slot map as it is made, so a cluster that cannot be reached
    then (down, or a certificate not trusted) is ``StorageUnavailable`` until it can,
    as a server or a Sentinel's master is, rather than an error at start-up."""

    def __init__(
        self, connect: Callable[[], redis.Redis | RedisCluster], *, pool_size: int
    ) -> None:
        self._connect = connect
        self._client: Any = None
        self._connecting = threading.Lock()
        self._limiter = trio.CapacityLimiter(pool_size)
        self._scripts: dict[str, Script] = {}
        self._unavailable = 0

    async def execute(self, *args: Arg) -> Any:
        return await self._call(lambda client: client.execute_command(*args))

    async def ping(self) -> None:
        # A thread stuck on a dead server is left behind when the caller gives up.
        await self._call(lambda client: client.ping(), abandon=True)

    async def pipeline(
        self,
        commands: Sequence[Command],
        script: tuple[str, Sequence[str], Sequence[Arg]] | None = None,
    ) -> list[Any]:
        def work(client: Any) -> list[Any]:
            # One round trip (per node, on a cluster); no MULTI: each command stands alone.
            pipe = client.pipeline(transaction=False)
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
        def work(client: Any) -> Any:
            script = self._scripts.get(body)
            if script is None:
                script = self._scripts[body] = client.register_script(body)
            return script(keys=list(keys), args=list(args))

        return await self._call(work)

    def execute_ahead(self, *args: Arg) -> CommandWhenAsked:
        return CommandWhenAsked(self, args)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        def work(client: Any) -> list[bytes | None]:
            # A cluster reads slot by slot: these keys never need one atomic read.
            read = client.mget_nonatomic if isinstance(client, RedisCluster) else client.mget
            values: list[bytes | None] = read(keys)
            return values

        values: list[bytes | None] = await self._call(work)
        return values

    async def delete(self, keys: Sequence[str]) -> int:
        deleted: int = await self._call(lambda client: client.delete(*keys))
        return deleted

    async def delete_matching(self, pattern: str) -> int:
        def work(client: Any) -> int:
            deleted = 0
            batch: list[bytes] = []
            for key in client.scan_iter(match=pattern, count=_SCAN_BATCH):
                batch.append(key)
                if len(batch) >= _SCAN_BATCH:
                    deleted += client.unlink(*batch)
                    batch = []
            if batch:
                deleted += client.unlink(*batch)
            return deleted

        deleted: int = await self._call(work)
        return deleted

    def statistics(self) -> dict[str, int]:
        return {"unavailable": self._unavailable, "failovers": 0}

    async def aclose(self) -> None:
        if self._client is not None:
            await trio.to_thread.run_sync(self._client.close)

    async def _call(self, fn: Callable[[Any], Any], abandon: bool = False) -> Any:
        try:
            return await trio.to_thread.run_sync(
                lambda: fn(self._connected()), limiter=self._limiter, abandon_on_cancel=abandon
            )
        except (redis.ConnectionError, redis.TimeoutError) as e:
            self._unavailable += 1
            raise StorageUnavailable("cannot reach the redis memory store") from e

    def _connected(self) -> Any:
        """The client, made now if it was not yet (in a worker thread)."""
        if self._client is None:
            with self._connecting:  # one thread makes it; the others wait for it
                if self._client is None:
                    try:
                        self._client = self._connect()
                    except RedisClusterException as e:  # no node answered
                        raise redis.ConnectionError(str(e)) from e
        return self._client


class CommandWhenAsked:
    """A command asked for ahead, sent when its result is: a cluster's calls each take a
    worker thread, so nothing is gained by carrying it with another."""

    def __init__(self, client: ThreadedRedis, args: Sequence[Arg]) -> None:
        self._client = client
        self._args = args

    async def result(self) -> Any:
        return await self._client.execute(*self._args)

    def drop(self) -> None:
        """Nothing was sent."""
