"""``--workers 2``: two server processes behind one HTTP port, one gRPC port and one
/metrics, on PostgreSQL with Redis; a killed worker is replaced while the port keeps
answering; a stop drains them all; memory:// is refused."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.server.harness import (
    BASTION,
    ServerProcess,
    backend_storage,
    base_flags,
    fresh_sqlite_url,
    start_server,
)


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def wait_for(condition: object, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("workers")
    storage = backend_storage("postgres", tmp, "workers")
    process = start_server([*storage.flags, "--workers=2"], tmp, name="workers")
    try:
        wait_for(lambda: len(children(process.process.pid)) == 2)
        yield process
    finally:
        process.terminate()


def served_by_every_worker(server: ServerProcess) -> dict[str, float]:
    """``bastion_http_requests_total`` of /healthz per worker label, from one /metrics."""
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("bastion_http_requests_total{") and 'route="/healthz"' in line:
            worker = line.split('worker="', 1)[1].split('"', 1)[0]
            counts[worker] = counts.get(worker, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_both_workers_serve_the_one_port_and_metrics_report_them_all(
    server: ServerProcess,
) -> None:
    for _ in range(200):  # a new connection each time: the kernel picks a worker for each
        assert (
            httpx.get(f"{server.url}/healthz", headers={"connection": "close"}).status_code == 200
        )
    counts = served_by_every_worker(server)
    assert set(counts) == {"0", "1"}, counts
    assert sum(counts.values()) >= 200
    assert min(counts.values()) > 0


def connection_counts(server: ServerProcess) -> list[int]:
    """What the workers publish of the connections they hold (the file the parent maps)."""
    maps = Path(f"/proc/{server.process.pid}/maps").read_text().splitlines()
    (path,) = {line.split()[-1] for line in maps if line.endswith("/connections")}
    data = Path(path).read_bytes()
    return [int.from_bytes(data[i : i + 8], "little", signed=True) for i in (0, 8)]


def test_connections_are_shared_evenly_between_the_workers(server: ServerProcess) -> None:
    """Each new connection goes to the worker holding fewer: kept open one after another,
    16 connections stay within one of each other (left to the kernel they drift: 13/3 and
    10/6 were seen). One step over is allowed: a worker the machine did not run for
    ``YIELD_LIMIT`` is passed by (the other accepts rather than keep a client waiting)."""
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    wait_for(lambda: connection_counts(server) == [0, 0])
    held, uneven = [], 0
    try:
        for _ in range(16):
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", "/healthz")
            reply = connection.getresponse()
            reply.read()
            assert reply.status == 200
            held.append(connection)
            counts = connection_counts(server)
            uneven += abs(counts[0] - counts[1]) > 1
        assert sum(counts) == 16
        assert uneven <= 1
        assert abs(counts[0] - counts[1]) <= 2, counts
    finally:
        for connection in held:
            connection.close()
    wait_for(lambda: connection_counts(server) == [0, 0])


def test_grpc_answers_on_the_shared_port(server: ServerProcess) -> None:
    for _ in range(10):
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            meta = authorizer_pb2_grpc.AuthorizerServiceStub(channel).Meta(
                authorizer_pb2.MetaRequest(), timeout=10
            )
            assert meta.version


def test_a_killed_worker_is_replaced_and_the_port_keeps_answering(server: ServerProcess) -> None:
    before = children(server.process.pid)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    # While it is gone, the other worker answers on the same port.
    for _ in range(20):
        assert (
            httpx.get(f"{server.url}/healthz", headers={"connection": "close"}).status_code == 200
        )
    wait_for(lambda: len(children(server.process.pid) - {victim}) == 2)
    assert victim not in children(server.process.pid)


def test_a_stop_drains_the_workers(tmp_path: Path) -> None:
    url = fresh_sqlite_url(tmp_path, "workers-stop")
    server = start_server([*base_flags("sqlite", url), "--workers=2"], tmp_path, name="stop")
    wait_for(lambda: len(children(server.process.pid)) == 2)
    workers = children(server.process.pid)
    assert server.terminate() == 0
    assert all(not Path(f"/proc/{pid}").exists() for pid in workers)


def test_memory_store_in_one_process_is_refused_with_workers(tmp_path: Path) -> None:
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path, "w")), "--workers=2",
             "--memory-store-url=memory://"]  # fmt: skip
    done = subprocess.run([BASTION, *flags], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--workers above 1 needs a memory store the processes share" in done.stderr
