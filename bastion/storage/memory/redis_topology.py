"""One client for each topology a ``--memory-store-url`` can name, all behind
:class:`RedisClient`.

- ``redis://`` / ``rediss://``: one server (``[user:password@]host[:port][/db]``, TLS
  settings in the query as redis-py names them: ``ssl_cert_reqs``, ``ssl_ca_certs``,
  ``ssl_certfile``, ``ssl_keyfile``, ``ssl_check_hostname``). The trio client of
  :mod:`storage.memory.resp`.
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`` (and
  ``rediss+sentinel://``): the trio client too. The sentinels are asked for the master of
  ``service`` (``SENTINEL get-master-addr-by-name``); after a connection error or a
  ``READONLY`` reply the pool asks again, so the next connection goes to the promoted
  master. The password (if any) is the master's; the sentinels themselves are reached
  without one. ``rediss+sentinel`` is TLS to the sentinels and to the master alike, with
  the same ``ssl_*`` options (as go-redis does; redis-py's ``Sentinel`` needs its
  ``sentinel_kwargs`` for that): a deployment that runs TLS runs it everywhere, and a
  Redis with ``tls-port`` and ``port 0`` takes nothing else. The master's certificate is
  checked against the address the sentinels give, an IP unless they announce hostnames.
- ``redis+cluster://[user:password@]host:port[,host:port...]`` (and
  ``rediss+cluster://``, the same ``ssl_*`` options, checked against the addresses the
  nodes announce): redis-py's RedisCluster in worker threads
  (:mod:`storage.memory.redis_threads`); it follows the slot map and its MOVED/ASK
  redirections. Nothing here routes a key.
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol

import trio

from bastion.core.redis_url import TlsSettings, parse_redis_url
from bastion.storage.memory.redis_threads import ThreadedRedis, cluster_client
from bastion.storage.memory.resp import (
    Address,
    Arg,
    Command,
    ConnectionLost,
    ConnectOptions,
    Pool,
    ReplyError,
    Rider,
    connect,
)

__all__ = [
    "CommandAhead",
    "RedisClient",
    "ScriptCall",
    "SentinelLocator",
    "TrioRedis",
    "redis_client",
]

#: A Lua script's body, keys and arguments.
ScriptCall = tuple[str, Sequence[str], Sequence[Arg]]

_SCAN_BATCH = 500


class CommandAhead(Protocol):
    """A command asked for ahead of need (:meth:`RedisClient.execute_ahead`)."""

    async def result(self) -> Any:
        """Its reply, as :meth:`RedisClient.execute` gives it."""
        ...

    def drop(self) -> None:
        """Not needed after all: nothing more is sent for it."""
        ...


class RedisClient(Protocol):
    """The commands the memory store sends. Error replies are raised as
    :class:`ReplyError` (redis-py's own on a cluster); an unreachable server as
    ``StorageUnavailable``."""

    async def execute(self, *args: Arg) -> Any:
        """One command on the key it names."""
        ...

    async def pipeline(
        self, commands: Sequence[Command], script: ScriptCall | None = None
    ) -> list[Any]:
        """Several commands in one round trip (each on its own: no MULTI), then ``script``
        (body, keys, args), whose reply comes last: in the same round trip where the
        client can."""
        ...

    async def script(self, body: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """A Lua script, by its digest once the server has it."""
        ...

    def execute_ahead(self, *args: Arg) -> CommandAhead:
        """A read (a command safe to send twice) that the calling task will want after its
        next request: where the client can, it goes out in that request's round trip.
        The caller must ask for its ``result`` or ``drop`` it."""
        ...

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]: ...

    async def delete(self, keys: Sequence[str]) -> int: ...

    async def delete_matching(self, pattern: str) -> int:
        """Unlink every key matching the glob ``pattern``; how many there were."""
        ...

    async def ping(self) -> None: ...

    def statistics(self) -> dict[str, int]: ...

    async def aclose(self) -> None: ...


def redis_client(url: str, *, pool_size: int, timeout: float) -> RedisClient:
    """The client for ``url``'s topology."""
    topology = parse_redis_url(url)
    if topology.kind == "cluster":
        return ThreadedRedis(
            partial(cluster_client, topology, pool_size=pool_size, timeout=timeout),
            pool_size=pool_size,
        )
    options = ConnectOptions(
        timeout=timeout,
        username=topology.username,
        password=topology.password,
        db=topology.db,
        tls=tls_context(topology.tls_settings()) if topology.tls else None,
    )
    if topology.kind == "sentinel":
        locator = SentinelLocator(
            topology.hosts, topology.service, timeout=timeout, tls=options.tls
        )
        pool = Pool(locator.locate, options, size=pool_size, forget=locator.forget)
        return TrioRedis(pool, locator)
    (address,) = topology.hosts
    return TrioRedis(Pool(_fixed(address), options, size=pool_size))


class TrioRedis:
    """:class:`RedisClient` on one server (or a Sentinel's master) through a trio pool."""

    def __init__(self, pool: Pool, locator: SentinelLocator | None = None) -> None:
        self._pool = pool
        self._locator = locator
        self._digests: dict[str, str] = {}

    async def execute(self, *args: Arg) -> Any:
        (reply,) = await self._pool.request([args])
        return _raised(reply)

    async def pipeline(
        self, commands: Sequence[Command], script: ScriptCall | None = None
    ) -> list[Any]:
        if script is None:
            return [_raised(reply) for reply in await self._pool.request(commands)]
        *replies, last = await self._pool.request([*commands, self._evalsha(*script)])
        if _unknown(last):
            last = await self.script(*script)
        return [_raised(reply) for reply in (*replies, last)]

    async def script(self, body: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        (reply,) = await self._pool.request([self._evalsha(body, keys, args)])
        if _unknown(reply):
            # The server has not seen it (or flushed its scripts): EVAL caches it again.
            (reply,) = await self._pool.request([["EVAL", body, len(keys), *keys, *args]])
        return _raised(reply)

    def execute_ahead(self, *args: Arg) -> _RidingCommand:
        return _RidingCommand(self._pool, self._pool.ride([args]))

    def _evalsha(self, body: str, keys: Sequence[str], args: Sequence[Arg]) -> Command:
        digest = self._digests.get(body)
        if digest is None:
            digest = hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()
            self._digests[body] = digest
        return ["EVALSHA", digest, len(keys), *keys, *args]

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        values: list[bytes | None] = await self.execute("MGET", *keys)
        return values

    async def delete(self, keys: Sequence[str]) -> int:
        deleted: int = await self.execute("DEL", *keys)
        return deleted

    async def delete_matching(self, pattern: str) -> int:
        deleted, cursor = 0, b"0"
        while True:
            cursor, keys = await self.execute(
                "SCAN", cursor, "MATCH", pattern, "COUNT", _SCAN_BATCH
            )
            if keys:
                deleted += await self.execute("UNLINK", *keys)
            if cursor == b"0":
                return deleted

    async def ping(self) -> None:
        await self.execute("PING")

    def statistics(self) -> dict[str, int]:
        return {
            "unavailable": self._pool.unavailable,
            "failovers": self._locator.master_changes if self._locator else 0,
            "connections_opened": self._pool.opened,
        }

    async def aclose(self) -> None:
        await self._pool.aclose()


class _RidingCommand:
    """A command on board the task's next request (:meth:`Pool.ride`)."""

    def __init__(self, pool: Pool, rider: Rider) -> None:
        self._pool = pool
        self._rider = rider

    async def result(self) -> Any:
        (reply,) = await self._pool.replies(self._rider)
        return _raised(reply)

    def drop(self) -> None:
        self._pool.unseat(self._rider)


class SentinelLocator:
    """Where the sentinels say the master of ``service`` is, asked once and kept until
    :meth:`forget`; counts how often the answer changed (the failovers seen)."""

    def __init__(
        self,
        sentinels: Sequence[Address],
        service: str,
        *,
        timeout: float,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._sentinels = list(sentinels)
        self._service = service
        self._options = ConnectOptions(timeout=timeout, tls=tls)
        self._lock = trio.Lock()
        self._master: Address | None = None
        self._last: Address | None = None
        self.master_changes = 0

    async def locate(self) -> Address:
        async with self._lock:  # one question at a time; the others take its answer
            if self._master is None:
                self._master = await self._ask()
                if self._last is not None and self._master != self._last:
                    self.master_changes += 1
                self._last = self._master
            return self._master

    def forget(self) -> None:
        self._master = None

    async def _ask(self) -> Address:
        errors: list[str] = []
        for sentinel in list(self._sentinels):
            try:
                connection = await connect(sentinel, self._options)
                try:
                    with trio.fail_after(self._options.timeout):
                        (reply,) = await connection.request(
                            [["SENTINEL", "get-master-addr-by-name", self._service]]
                        )
                finally:
                    connection.close()
            except (OSError, ConnectionLost, trio.TooSlowError, trio.BrokenResourceError) as exc:
                errors.append(f"{sentinel}: {exc!r}")
                continue
            if isinstance(reply, list) and len(reply) == 2:
                # The sentinel that answered is asked first next time.
                self._sentinels.remove(sentinel)
                self._sentinels.insert(0, sentinel)
                return reply[0].decode(), int(reply[1])
            errors.append(f"{sentinel}: no master named {self._service!r}")
        raise OSError("no sentinel named the master: " + "; ".join(errors))


def tls_context(settings: TlsSettings) -> ssl.SSLContext:
    """A client context that verifies the server (and its name) unless told otherwise."""
    context = ssl.create_default_context(cafile=settings.ca_certs)
    context.check_hostname = settings.check_hostname
    context.verify_mode = {
        "required": ssl.CERT_REQUIRED,
        "optional": ssl.CERT_OPTIONAL,
        "none": ssl.CERT_NONE,
    }[settings.cert_reqs]
    if settings.certfile is not None:
        context.load_cert_chain(settings.certfile, settings.keyfile)
    return context


def _fixed(address: Address) -> Callable[[], Awaitable[Address]]:
    async def locate() -> Address:
        return address

    return locate


def _unknown(reply: Any) -> bool:
    return isinstance(reply, ReplyError) and str(reply).startswith("NOSCRIPT")


def _raised(reply: Any) -> Any:
    if isinstance(reply, ReplyError):
        raise reply
    return reply
