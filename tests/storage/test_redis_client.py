"""The trio Redis client under the memory store (``storage.memory.resp``), against
redis-server processes of the test's own: a request interrupted midway never leaves its
reply for the next one, pipelines answer in order, a dead server is StorageUnavailable
and a restarted one serves again, scripts survive a flush, AUTH/SELECT/TLS from the URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import redis
import trio
from trio.testing import assert_checkpoints

from bastion.storage.errors import StorageUnavailable
from bastion.storage.memory import RedisMemoryStore, resp
from bastion.storage.memory.redis_topology import RedisClient, redis_client
from bastion.storage.memory.resp import ReplyError, encode
from tests.redis_topologies import RedisProcess, start_redis
from tests.server.certificates import self_signed
from tests.server.harness import free_port
from tests.storage.helpers import eventually


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisProcess]:
    node = start_redis(tmp_path / "redis")
    try:
        yield node
    finally:
        node.stop()


def url(node: RedisProcess, db: int = 0) -> str:
    return f"redis://127.0.0.1:{node.port}/{db}"


async def wait_blocked(admin: redis.Redis, count: int) -> None:
    """Until the server has ``count`` clients blocked in a command."""

    async def blocked() -> bool:
        return bool(admin.info("clients")["blocked_clients"] == count)

    assert await eventually(blocked)


def test_commands_are_arrays_of_bulk_strings() -> None:
    assert encode([["SET", "k", b"\x00v", 5, 1.5], ["GET", "k"]]) == (
        b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\n\x00v\r\n$1\r\n5\r\n$3\r\n1.5\r\n"
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
    )


async def test_a_request_cancelled_midway_leaves_no_reply_for_the_next(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=1, timeout=5)
    admin = server.client()
    try:
        await client.execute("SET", "k", b"right")
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def blocked() -> None:
                with scope:
                    await client.execute("BLPOP", "list", 0)

            nursery.start_soon(blocked)
            await wait_blocked(admin, 1)
            scope.cancel()
        # Its reply is now on its way; a reused connection would hand it to the GET.
        admin.lpush("list", "late")
        assert await client.execute("GET", "k") == b"right"
        assert client.statistics()["connections_opened"] == 2
    finally:
        await client.aclose()


async def test_a_request_that_times_out_is_unavailable_and_its_connection_dropped(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=1, timeout=0.5)
    admin = server.client()
    try:
        await client.execute("SET", "k", b"right")
        with pytest.raises(StorageUnavailable):
            await client.execute("BLPOP", "list", 0)
        admin.lpush("list", "late")
        assert await client.execute("GET", "k") == b"right"
        assert client.statistics() == {
            "unavailable": 1,
            "failovers": 0,
            "connections_opened": 2,
        }
    finally:
        await client.aclose()


async def test_pipelines_answer_in_order_under_concurrency(server: RedisProcess) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)

    async def one(n: int) -> None:
        keys = [f"p:{n}:{i}" for i in range(100)]
        writes = [("SET", key, f"{n}-{i}") for i, key in enumerate(keys)]
        reads = [("GET", key) for key in reversed(keys)]
        replies = await client.pipeline([*writes, ("INCR", f"c:{n}"), *reads])
        assert replies[:100] == [b"OK"] * 100
        assert replies[100] == 1
        assert replies[101:] == [f"{n}-{i}".encode() for i in reversed(range(100))]

    try:
        async with trio.open_nursery() as nursery:
            for n in range(16):
                nursery.start_soon(one, n)
                if n % 2:
                    await trio.lowlevel.checkpoint()  # not all in one scheduler pass
        assert client.statistics()["connections_opened"] <= 2
    finally:
        await client.aclose()


async def test_requests_of_one_scheduler_pass_share_one_round_trip(server: RedisProcess) -> None:
    client = redis_client(url(server), pool_size=16, timeout=5)
    got: dict[int, object] = {}

    async def one(n: int) -> None:
        got[n] = await client.execute("GET", f"b:{n}")

    try:
        server.client().mset({f"b:{n}": n for n in range(16)})
        async with trio.open_nursery() as nursery:
            for n in range(16):
                nursery.start_soon(one, n)
        assert got == {n: str(n).encode() for n in range(16)}
        # one connection, not one per caller: the 16 GETs went out as one pipeline
        assert client.statistics()["connections_opened"] == 1
    finally:
        await client.aclose()


async def test_a_caller_cancelled_in_a_shared_round_trip_strands_no_other(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=4, timeout=5)
    try:
        await client.execute("SET", "k", b"v")
        results: list[object] = []
        async with trio.open_nursery() as nursery:

            async def cancelled() -> None:
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await client.execute("GET", "k")
                results.append("cancelled")

            async def kept() -> None:
                results.append(await client.execute("GET", "k"))

            nursery.start_soon(cancelled)
            nursery.start_soon(kept)
        assert sorted(map(str, results)) == ["b'v'", "cancelled"]
    finally:
        await client.aclose()


async def test_an_error_reply_in_a_pipeline_is_raised_and_the_connection_kept(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=1, timeout=5)
    try:
        with pytest.raises(ReplyError, match="not an integer"):
            await client.pipeline([("SET", "k", "x"), ("INCR", "k"), ("APPEND", "k", "y")])
        # Every reply to that pipeline was read: the next answer is the GET's own.
        assert await client.execute("GET", "k") == b"xy"
        assert client.statistics()["connections_opened"] == 1
    finally:
        await client.aclose()


async def test_scripts_run_again_after_the_server_forgets_them(server: RedisProcess) -> None:
    store = RedisMemoryStore(url(server), pool_size=2, timeout=5)
    try:
        assert await store.incr("n", ttl=60) == 1
        server.client().script_flush()
        assert await store.incr("n", ttl=60) == 2
        assert (await store.token_bucket("b", 1.0, 1))[0] is True
    finally:
        await store.aclose()


async def test_a_killed_server_is_unavailable_then_serves_again(tmp_path: Path) -> None:
    port = free_port()
    node = start_redis(tmp_path / "redis", port=port)
    store = RedisMemoryStore(f"redis://127.0.0.1:{port}/0", pool_size=4, timeout=2)
    try:
        await store.set("k", b"1")
        node.kill()
        with pytest.raises(StorageUnavailable):
            await store.get("k")
        with pytest.raises(StorageUnavailable):
            await store.ping()
        assert store.statistics()["unavailable"] == 2
        node = start_redis(tmp_path / "redis", port=port)
        await store.set("k", b"2")
        assert await store.get("k") == b"2"
        assert store.statistics()["unavailable"] == 2
        assert store.statistics()["connections_opened"] == 2
    finally:
        await store.aclose()
        node.stop()


async def test_an_idle_connection_to_a_restarted_server_is_replaced_unseen(
    tmp_path: Path,
) -> None:
    port = free_port()
    node = start_redis(tmp_path / "redis", port=port)
    store = RedisMemoryStore(f"redis://127.0.0.1:{port}/0", pool_size=4, timeout=2)
    try:
        await store.set("k", b"1")
        node.stop()
        node = start_redis(tmp_path / "redis", port=port)
        # The pooled connection is dead; nothing had been sent on it, so it is retried.
        assert await store.get("k") is None
        assert store.statistics()["unavailable"] == 0
    finally:
        await store.aclose()
        node.stop()


async def test_user_password_and_database_from_the_url(tmp_path: Path) -> None:
    node = start_redis(tmp_path / "redis", "--user", "alice", "on", ">s3cret", "~*", "&*", "+@all")
    key = f"acl:{uuid.uuid4().hex}"
    store = RedisMemoryStore(
        f"redis://alice:s3cret@127.0.0.1:{node.port}/3", pool_size=2, timeout=2
    )
    wrong = RedisMemoryStore(f"redis://alice:nope@127.0.0.1:{node.port}/3", pool_size=2, timeout=2)
    try:
        await store.set(key, b"v")
        assert redis.Redis(port=node.port, db=3).get(key) == b"v"
        assert redis.Redis(port=node.port, db=0).get(key) is None
        with pytest.raises(StorageUnavailable):
            await wrong.get(key)
    finally:
        await store.aclose()
        await wrong.aclose()
        node.stop()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[RedisProcess, int, Path]]:
    cert, key = self_signed(tmp_path, "redis")
    tls_port = free_port()
    node = start_redis(
        tmp_path / "redis",
        *("--tls-port", str(tls_port), "--tls-cert-file", str(cert)),
        *("--tls-key-file", str(key), "--tls-auth-clients", "no"),
    )
    try:
        yield node, tls_port, cert
    finally:
        node.stop()


async def test_rediss_talks_tls_and_checks_the_certificate(
    tls_server: tuple[RedisProcess, int, Path],
) -> None:
    node, tls_port, cert = tls_server
    trusted = RedisMemoryStore(
        f"rediss://127.0.0.1:{tls_port}/2?ssl_ca_certs={cert}", pool_size=2, timeout=2
    )
    untrusted = RedisMemoryStore(f"rediss://127.0.0.1:{tls_port}/2", pool_size=2, timeout=2)
    try:
        await trusted.set("tls", b"yes")
        assert await trusted.get("tls") == b"yes"
        assert redis.Redis(port=node.port, db=2).get("tls") == b"yes"
        with pytest.raises(StorageUnavailable):
            await untrusted.get("tls")
    finally:
        await trusted.aclose()
        await untrusted.aclose()


async def test_closing_closes_the_idle_connections(server: RedisProcess) -> None:
    client: RedisClient = redis_client(url(server), pool_size=4, timeout=5)
    admin = server.client()
    # By id: another test's connection may still be closing while this one counts.
    before = {entry["id"] for entry in admin.client_list()}
    try:
        await client.pipeline([("PING",)])
        opened = {entry["id"] for entry in admin.client_list()} - before
        assert len(opened) == 1
    finally:
        await client.aclose()

    async def closed() -> bool:
        return not opened & {entry["id"] for entry in admin.client_list()}

    assert await eventually(closed)
    with pytest.raises(StorageUnavailable):
        await client.execute("PING")


async def test_every_call_is_a_checkpoint(server: RedisProcess) -> None:
    store = RedisMemoryStore(url(server), pool_size=2, timeout=5)
    try:
        await store.set("warm", b"1")  # a pooled connection: nothing left to wait for
        with assert_checkpoints():
            await store.get("warm")
        with assert_checkpoints():
            await store.set_many([("a", b"1", None), ("b", b"2", 60.0)])
        with assert_checkpoints():
            await store.token_bucket("bucket", 10.0, 5)
    finally:
        await store.aclose()


async def test_a_pipeline_ending_in_a_script_the_server_forgot(server: RedisProcess) -> None:
    store = RedisMemoryStore(url(server), pool_size=1, timeout=5)
    try:
        await store.set_many([("a", b"1", 60)], index=("idx", "x", 60))
        server.client().script_flush()
        await store.set_many([("b", b"2", 60)], index=("idx", "y", 60))
        assert await store.get_many("a", "b") == [b"1", b"2"]
        assert await store.index_members("idx") == ["x", "y"]
        assert store.statistics()["connections_opened"] == 1
    finally:
        await store.aclose()


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many commands each request to the server carried, in order."""
    sent: list[int] = []
    real = resp.Connection.request

    async def counted(self: resp.Connection, commands: Sequence[resp.Command]) -> list[object]:
        sent.append(len(commands))
        return await real(self, commands)

    monkeypatch.setattr(resp.Connection, "request", counted)
    return sent


# The riders below are INCRs, where a read would ride, so that each run shows.


async def test_a_rider_goes_out_with_its_tasks_next_request(
    server: RedisProcess, round_trips: list[int]
) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        await client.execute("SET", "k", b"v")
        round_trips.clear()
        ahead = client.execute_ahead("INCR", "runs")
        assert await client.execute("GET", "k") == b"v"
        assert await ahead.result() == 1
        ahead.drop()  # after its result: nothing to take back
        assert round_trips == [2]  # the GET and the rider, one round trip
    finally:
        await client.aclose()


async def test_a_rider_asked_for_first_goes_alone_and_only_once(
    server: RedisProcess, round_trips: list[int]
) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        ahead = client.execute_ahead("INCR", "runs")
        assert await ahead.result() == 1
        await client.execute("GET", "k")
        assert round_trips == [1, 1]
        assert server.client().get("runs") == b"1"
    finally:
        await client.aclose()


async def test_a_dropped_rider_is_never_sent(server: RedisProcess) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        client.execute_ahead("INCR", "runs").drop()
        await client.execute("GET", "k")
        assert server.client().get("runs") is None
    finally:
        await client.aclose()


async def test_a_rider_rides_only_its_own_tasks_request(
    server: RedisProcess, round_trips: list[int]
) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        ahead = client.execute_ahead("INCR", "runs")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.execute, "GET", "k")  # another task's request
        assert server.client().get("runs") is None
        assert await ahead.result() == 1
        assert round_trips == [1, 1]
    finally:
        await client.aclose()


async def test_a_rider_whose_carrier_was_cancelled_goes_alone_when_asked(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        ahead = client.execute_ahead("INCR", "runs")
        with trio.CancelScope() as scope:
            scope.cancel()
            await client.execute("GET", "k")
        assert await ahead.result() == 1
    finally:
        await client.aclose()


async def test_an_error_reply_to_a_rider_is_raised_to_its_owner_alone(
    server: RedisProcess,
) -> None:
    client = redis_client(url(server), pool_size=2, timeout=5)
    try:
        await client.execute("SET", "k", b"not a number")
        ahead = client.execute_ahead("INCR", "k")
        assert await client.execute("GET", "k") == b"not a number"
        with pytest.raises(ReplyError, match="not an integer"):
            await ahead.result()
    finally:
        await client.aclose()
