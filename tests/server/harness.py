"""Start real bastion server processes for tests and talk to them over sockets."""

from __future__ import annotations

import contextlib
import itertools
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url
from tests.server.forked import ForkedServer
from tests.server.memory_time import MemoryEntries
from tests.services import worker_index

BASTION = str(Path(sys.executable).with_name("bastion"))
ADMIN_SECRET = "test-admin-secret"
CLIENT_ID = "test-client"
CLIENT_SECRET = "test-client-secret"


_next_port = itertools.count()


def free_port() -> int:
    """A free port from this xdist worker's own range, below the kernel's ephemeral range.

    Asking the kernel for port 0 and releasing it races: under parallel load another
    worker (or an outgoing connection) can take the same port before the server binds it.
    Each worker (its xdist number plus ``BASTION_TEST_SLOT``, modulo 80: runs side by side
    take slots 0, 20, 40, 60) has 250 ports of its own, 12000-31999 in all; a port is
    handed out only if it binds now.
    """
    base = 12000 + (worker_index() % 80) * 250
    for _ in range(250):
        port = base + next(_next_port) % 250
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in this worker's range")


#: The HTTP servers bastion can run (``--http-server``): tests of the HTTP edge run on both.
HTTP_SERVERS = ("h11", "hypercorn")


def base_flags(database_type: str, database_url: str) -> list[str]:
    """Every required flag, and explicit high rate limits (tests that test limits lower them)."""
    return [
        f"--admin-secret={ADMIN_SECRET}",
        f"--client-id={CLIENT_ID}",
        f"--client-secret={CLIENT_SECRET}",
        f"--database-type={database_type}",
        f"--database-url={database_url}",
        "--jwt-type=HS256",
        "--jwt-secret=test-jwt-secret-of-sufficient-length",
        "--rate-limit-rps=100000",
        "--rate-limit-burst=100000",
        "--log-level=warn",
    ]


@dataclass(frozen=True)
class BackendStorage:
    """A fresh database (and, on PostgreSQL, a fresh Redis memory store) for one server."""

    flags: list[str]
    database_url: str
    #: None on SQLite: the memory store is the database itself
    redis_url: str | None

    def memory(self) -> MemoryEntries:
        if self.redis_url is None:
            return MemoryEntries(sqlite_path=self.database_url)
        return MemoryEntries(redis_url=self.redis_url)


def backend_storage(backend: str, tmp: Path, purpose: str) -> BackendStorage:
    """``sqlite`` (the embedded choice) or ``postgres`` (PostgreSQL with Redis)."""
    if backend == "sqlite":
        url = fresh_sqlite_url(tmp, purpose)
        return BackendStorage(base_flags("sqlite", url), url, None)
    url, redis_url = fresh_postgres_url(purpose), fresh_redis_url()
    flags = [*base_flags("postgres", url), f"--memory-store-url={redis_url}"]
    return BackendStorage(flags, url, redis_url)


@dataclass
class ServerProcess:
    process: ForkedServer | subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    metrics_port: int
    stderr_path: Path
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = f"http://127.0.0.1:{self.http_port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def client(self, **kwargs: object) -> httpx.Client:
        headers = {"origin": self.url}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)  # type: ignore[arg-type]

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited {self.process.returncode}:\n{self.stderr()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"server did not become ready:\n{self.stderr()}")

    def terminate(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def start_server(
    flags: list[str],
    tmp_path: Path,
    *,
    wait: bool = True,
    name: str = "server",
    grpc_port: int | None = None,
    http_port: int | None = None,
    console_script: bool = False,
) -> ServerProcess:
    """``http_port``: for a test that must name the server's URL before it starts.

    The server is forked from this worker's forkserver (:mod:`tests.server.forked`);
    ``console_script`` runs the ``bastion`` command instead, for a test that reads the
    process's own command line.
    """
    http_port, metrics_port = http_port or free_port(), free_port()
    grpc_port = grpc_port or free_port()
    stderr_path = tmp_path / f"{name}-{http_port}.stderr"
    args = [
        "--host=127.0.0.1",
        f"--http-port={http_port}",
        f"--grpc-port={grpc_port}",
        f"--metrics-port={metrics_port}",
        *flags,
    ]
    process: ForkedServer | subprocess.Popen[bytes]
    if console_script:
        with stderr_path.open("wb") as err:
            process = subprocess.Popen(
                [BASTION, *args], stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path
            )
    else:
        stderr_path.write_bytes(b"")
        process = ForkedServer(args, tmp_path, stderr_path)
    server = ServerProcess(process, http_port, grpc_port, metrics_port, stderr_path)
    if wait:
        server.wait_ready()
    return server


@contextlib.contextmanager
def running(flags: list[str], tmp_path: Path, **kwargs: object) -> Iterator[ServerProcess]:
    server = start_server(flags, tmp_path, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.terminate()
