"""Real Redis topologies for tests: a Sentinel-watched master with a replica, and a
three-master Cluster, each started as redis-server processes on loopback in a temporary
directory and stopped by the test that started it; each also TLS-only (:class:`Tls`:
plain ports closed, replication, the cluster bus and the sentinels' links over TLS).

Ports come from the calling xdist worker's own range (``free_port``). Nothing here is a
fake: bastion talks to these servers as it would in production.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.server.certificates import self_signed
from tests.server.harness import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
SERVICE = "bastion"


def _url(kind: str, rest: str, tls: Tls | None) -> str:
    if tls is None:
        return f"redis+{kind}://{rest}"
    return f"rediss+{kind}://{rest}?ssl_ca_certs={tls.ca}"


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


@dataclass(frozen=True)
class Tls:
    """A server's certificate and key (self-signed, for 127.0.0.1) and ``ca``, the
    certificates it trusts when it is the client (a replica, a sentinel, a cluster peer)."""

    cert: Path
    key: Path
    ca: Path

    @classmethod
    def self_signed(cls, directory: Path, name: str, *, trust: Sequence[Path] = ()) -> Tls:
        """A new certificate; the servers using it trust it and ``trust`` besides."""
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = self_signed(directory, name)
        ca = directory / f"{name}-ca.pem"
        ca.write_bytes(b"".join(path.read_bytes() for path in (cert, *trust)))
        return cls(cert, key, ca)

    def settings(self) -> list[tuple[str, str]]:
        """TLS for everything a server (or sentinel) does; clients need no certificate."""
        return [
            ("tls-cert-file", str(self.cert)),
            ("tls-key-file", str(self.key)),
            ("tls-ca-cert-file", str(self.ca)),
            ("tls-auth-clients", "no"),
            ("tls-replication", "yes"),
        ]


@dataclass
class RedisProcess:
    port: int
    directory: Path
    process: subprocess.Popen[bytes]
    #: when set, ``port`` is a TLS port (the only one)
    tls: Tls | None = None

    def client(self) -> redis.Redis:
        if self.tls is None:
            return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2)
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=2,
            ssl=True,
            ssl_ca_certs=str(self.tls.ca),
        )

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


def start_redis(
    directory: Path, *args: str, port: int | None = None, tls: Tls | None = None
) -> RedisProcess:
    """A redis-server on ``port``, TLS-only with ``tls``."""
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    ports = ["--port", str(port)]
    if tls is not None:
        ports = ["--port", "0", "--tls-port", str(port)]
        for name, value in tls.settings():
            ports += [f"--{name}", value]
    with (directory / "redis.log").open("ab") as log:
        process = subprocess.Popen(
            [
                REDIS_SERVER,
                *ports,
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
    node = RedisProcess(port, directory, process, tls)
    _wait(lambda: node.client().ping(), what=f"redis-server on {port}")
    return node


@dataclass
class SentinelSet:
    master: RedisProcess
    replica: RedisProcess
    sentinels: list[RedisProcess] = field(default_factory=list)

    def url(self, db: int = 0) -> str:
        """``redis+sentinel://``; ``rediss+sentinel://`` trusting the sentinels' CA file
        (with the servers' certificate in it) for a TLS set."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return _url("sentinel", f"{hosts}/{SERVICE}/{db}", self.sentinels[0].tls)

    def current_master_port(self) -> int:
        reply = self.sentinels[0].client().sentinel_get_master_addr_by_name(SERVICE)
        return int(reply[1])

    def stop(self) -> None:
        for node in (*self.sentinels, self.replica, self.master):
            node.stop()


@contextlib.contextmanager
def sentinel_set(
    directory: Path, tls: Tls | None = None, sentinel_tls: Tls | None = None
) -> Iterator[SentinelSet]:
    """One master, one replica, three sentinels (quorum 2), quick to fail over. With
    ``tls``, all of them TLS-only; the sentinels use ``sentinel_tls`` (``tls`` unless
    given: each must trust the other's certificate)."""
    sentinel_tls = sentinel_tls or tls
    master = start_redis(directory / "master", tls=tls)
    replica = start_redis(
        directory / "replica", "--replicaof", "127.0.0.1", str(master.port), tls=tls
    )
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
            ports = f"port {port}\n"
            if sentinel_tls is not None:
                ports = f"port 0\ntls-port {port}\n" + "".join(
                    f"{name} {value}\n" for name, value in sentinel_tls.settings()
                )
            conf.write_text(
                f"{ports}bind 127.0.0.1\ndir {conf.parent}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 5000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            with (conf.parent / "sentinel.log").open("ab") as log:
                process = subprocess.Popen(
                    [REDIS_SERVER, str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
                )
            node = RedisProcess(port, conf.parent, process, sentinel_tls)
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

    def url(self) -> str:
        """``redis+cluster://``; ``rediss+cluster://`` trusting the nodes' CA file for a
        TLS cluster."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return _url("cluster", hosts, self.nodes[0].tls)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@contextlib.contextmanager
def redis_cluster(
    directory: Path, masters: int = 3, tls: Tls | None = None
) -> Iterator[ClusterSet]:
    """``masters`` masters, no replicas, every slot assigned; with ``tls``, TLS-only (the
    nodes announce their TLS ports and talk TLS on the cluster bus)."""
    nodes: list[RedisProcess] = []
    bus = ["--tls-cluster", "yes"] if tls is not None else []
    cli_tls = ["--tls", "--cacert", str(tls.ca)] if tls is not None else []
    try:
        for index in range(masters):
            nodes.append(
                start_redis(
                    directory / f"node{index}",
                    *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                    *("--cluster-node-timeout", "2000"),
                    # The bus port from this worker's range (not port + 10000: another's).
                    *("--cluster-port", str(free_port()), *bus),
                    tls=tls,
                )
            )
        addresses = [f"127.0.0.1:{n.port}" for n in nodes]
        subprocess.run(
            [
                REDIS_CLI,
                *cli_tls,
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
