"""Real Redis topologies for tests: a Sentinel-watched master with a replica, and a
three-master Cluster, each started as redis-server processes on loopback in a temporary
directory and stopped by the test that started it.

Ports come from the calling xdist worker's own range (``free_port``). Nothing here is a
fake: bastion talks to these servers through redis-py's own Sentinel and Cluster
support, as it would in production.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.server.harness import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
SERVICE = "bastion"


def _wait(check: object, timeout: float = 30.0, what: str = "redis") -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except (redis.RedisError, OSError) as exc:
            last = exc
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up in {timeout} s: {last}")


@dataclass
class RedisProcess:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def start_redis(directory: Path, *args: str, port: int | None = None) -> RedisProcess:
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "redis.log").open("ab") as log:
        process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    node = RedisProcess(port, directory, process)
    _wait(lambda: node.client().ping(), what=f"redis-server on {port}")
    return node


@dataclass
class SentinelSet:
    master: RedisProcess
    replica: RedisProcess
    sentinels: list[RedisProcess] = field(default_factory=list)

    def url(self, db: int = 0, scheme: str = "redis+sentinel") -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"{scheme}://{hosts}/{SERVICE}/{db}"

    def current_master_port(self) -> int:
        reply = self.sentinels[0].client().sentinel_get_master_addr_by_name(SERVICE)
        return int(reply[1])

    def stop(self) -> None:
        for node in (*self.sentinels, self.replica, self.master):
            node.stop()


@contextlib.contextmanager
def sentinel_set(directory: Path) -> Iterator[SentinelSet]:
    """One master, one replica, three sentinels (quorum 2), quick to fail over."""
    master = start_redis(directory / "master")
    replica = start_redis(directory / "replica", "--replicaof", "127.0.0.1", str(master.port))
    found = SentinelSet(master, replica)
    try:
        _wait(
            lambda: replica.client().info("replication").get("master_link_status") == "up",
            what="the replica's link to its master",
        )
        for index in range(3):
            port = free_port()
            conf = directory / f"sentinel{index}" / "sentinel.conf"
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {conf.parent}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            with (conf.parent / "sentinel.log").open("ab") as log:
                process = subprocess.Popen(
                    [REDIS_SERVER, str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
                )
            node = RedisProcess(port, conf.parent, process)
            found.sentinels.append(node)
            _wait(lambda node=node: node.client().ping(), what=f"sentinel on {port}")
        _wait(
            lambda: all(
                s.client().sentinel_master(SERVICE).get("num-other-sentinels") == 2
                for s in found.sentinels
            ),
            what="the sentinels finding each other",
        )
        yield found
    finally:
        found.stop()


@dataclass
class ClusterSet:
    nodes: list[RedisProcess]

    def url(self, scheme: str = "redis+cluster") -> str:
        return f"{scheme}://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@contextlib.contextmanager
def redis_cluster(directory: Path, masters: int = 3) -> Iterator[ClusterSet]:
    """``masters`` masters, no replicas, every slot assigned."""
    nodes: list[RedisProcess] = []
    try:
        for index in range(masters):
            nodes.append(
                start_redis(
                    directory / f"node{index}",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                )
            )
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *addresses,
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        _wait(
            lambda: all(n.client().cluster("info").get("cluster_state") == "ok" for n in nodes),
            what="the cluster",
        )
        yield ClusterSet(nodes)
    finally:
        for node in nodes:
            node.stop()
