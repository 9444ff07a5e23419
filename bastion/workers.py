"""``--workers N``: one parent process and N server processes sharing its ports.

The parent binds the HTTP port once and every worker inherits that listening socket (the
kernel hands each new connection to one of the workers waiting on it); the gRPC port is
bound by every worker with ``SO_REUSEPORT``. The parent runs the migrations before any
worker starts (workers only check the schema), restarts a worker that dies, and on
SIGTERM or SIGINT passes the signal on and waits for the workers to drain.

``/metrics`` stays one endpoint: the parent serves it, from every worker's own metrics
(each worker listens on a loopback port of its own, written to the run directory),
each sample labelled ``worker="<n>"``.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from bastion import logs
from bastion.core.settings import Settings
from bastion.storage import open_storage
from bastion.storage_config import storage_config
from bastion.transports.http.balance import ABSENT, AcceptShares, WorkerShare
from bastion.transports.http.server import (
    HttpServer,
    ServerLimits,
    open_listeners,
    tls_context,
)

__all__ = ["WORKER_ENV", "WorkerSlot", "run_workers", "worker_slot"]

log = logging.getLogger("bastion.workers")

#: Set in a worker's environment: its number, the run directory, the HTTP socket's fd and
#: the gRPC port every worker binds.
WORKER_ENV = "BASTION_WORKER"
#: A worker that keeps dying is restarted at most this often.
RESTART_DELAY = 1.0
#: How long workers may take to drain after the stop signal, beyond the grace period.
STOP_MARGIN = 5.0


@dataclass(frozen=True, slots=True)
class WorkerSlot:
    """What a worker process is told by its parent."""

    index: int
    run_dir: Path
    http_fd: int
    grpc_port: int

    def encode(self) -> str:
        return f"{self.index}:{self.http_fd}:{self.grpc_port}:{self.run_dir}"

    @property
    def metrics_file(self) -> Path:
        return self.run_dir / f"worker-{self.index}.metrics"

    def share(self, workers: int) -> WorkerShare:
        """This worker's slot in the connection counts every worker publishes."""
        return WorkerShare(AcceptShares(shares_file(self.run_dir), workers), self.index)


def shares_file(run_dir: Path) -> Path:
    return run_dir / "connections"


def worker_slot() -> WorkerSlot | None:
    """This process's slot when a parent started it as a worker, else None."""
    raw = os.environ.get(WORKER_ENV)
    if not raw:
        return None
    index, fd, grpc_port, run_dir = raw.split(":", 3)
    return WorkerSlot(int(index), Path(run_dir), int(fd), int(grpc_port))


def _listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def _grpc_port(settings: Settings) -> tuple[int, socket.socket | None]:
    """The port every worker binds; for ``--grpc-port=0`` one picked now and held (bound,
    not listening, ``SO_REUSEPORT``) so no other program takes it meanwhile."""
    if not settings.enable_grpc or settings.grpc_port:
        return settings.grpc_port, None
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    holder = socket.socket(family, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind((settings.host, 0))
    return holder.getsockname()[1], holder


async def _migrate(settings: Settings) -> None:
    """Bring the schema up to date once, before any worker opens the database."""
    config = storage_config(settings)
    async with open_storage(config):
        pass


class _Supervisor:
    def __init__(self, settings: Settings, argv: list[str], run_dir: Path,
                 http: socket.socket, grpc_port: int) -> None:  # fmt: skip
        self.settings = settings
        self.argv = argv
        self.run_dir = run_dir
        self.http = http
        self.http_fd = http.fileno()
        self.grpc_port = grpc_port
        self.stopping = False
        self.processes: dict[int, trio.Process] = {}
        AcceptShares.create(shares_file(run_dir), settings.workers)
        self.shares = AcceptShares(shares_file(run_dir), settings.workers)

    def _command(self) -> list[str]:
        return [sys.executable, "-m", "bastion", *self.argv]

    async def keep_running(self, index: int) -> None:
        slot = WorkerSlot(index, self.run_dir, self.http_fd, self.grpc_port)
        while not self.stopping:
            env = {**os.environ, WORKER_ENV: slot.encode()}
            process = await trio.lowlevel.open_process(
                self._command(), env=env, pass_fds=(self.http_fd,)
            )
            self.processes[index] = process
            code = await process.wait()
            # Its connections are gone; until another starts, the others take them all.
            self.shares.publish(index, ABSENT)
            if self.stopping:
                return
            log.warning(
                "worker exited; starting another",
                extra={"worker": index, "pid": process.pid, **exit_facts(code)},
            )
            await trio.sleep(RESTART_DELAY)

    async def stop_on_signal(self, stop: trio.Event) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("stopping workers", extra={"signal": signal.Signals(signum).name})
                self.stopping = True
                # The parent's copy of the HTTP socket would keep the port open after the
                # workers closed theirs: a client told to close would reconnect into a
                # backlog nobody serves, and be reset at exit.
                self.http.close()
                for process in self.processes.values():
                    if process.returncode is None:
                        process.send_signal(signal.SIGTERM)
                with trio.move_on_after(self.settings.shutdown_timeout + STOP_MARGIN):
                    for process in self.processes.values():
                        await process.wait()
                for process in self.processes.values():
                    if process.returncode is None:
                        process.kill()
                stop.set()
                return


def exit_facts(code: int) -> dict[str, Any]:
    """A child's exit as log facts: its exit status, or the signal that ended it."""
    if code < 0:
        try:
            return {"signal": signal.Signals(-code).name}
        except ValueError:
            return {"signal": -code}
    return {"exit_status": code}


Message = MutableMapping[str, Any]


def metrics_app(run_dir: Path, workers: int) -> Callable[..., Awaitable[None]]:
    """``GET /metrics``: every worker's metrics, each sample labelled with its worker."""

    unreachable: set[int] = set()

    async def app(scope: Message, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics":
            await _answer(send, 404, b"not found\n", "text/plain")
            return
        body = await _gather(run_dir, workers, unreachable)
        await _answer(send, 200, body.encode(), CONTENT_TYPE_LATEST)

    return app


async def _answer(send: Any, status: int, body: bytes, content_type: str) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _gather(run_dir: Path, workers: int, unreachable: set[int]) -> str:
    """Every worker's samples. A worker that cannot be read (starting, restarting, or
    broken) is logged once until it answers again; its samples come back with it."""
    families: dict[str, Metric] = {}
    async with httpx.AsyncClient(timeout=5) as client:
        for index in range(workers):
            path = run_dir / f"worker-{index}.metrics"
            try:
                address = path.read_text().strip()
                answer = await client.get(f"{address}/metrics")
                answer.raise_for_status()
                text = answer.text
            except (OSError, httpx.HTTPError) as exc:
                if index not in unreachable:
                    unreachable.add(index)
                    log.warning(
                        "worker metrics unreadable",
                        extra={"worker": index, "error_type": type(exc).__name__},
                    )
                continue
            if index in unreachable:
                unreachable.discard(index)
                log.info("worker metrics readable again", extra={"worker": index})
            for family in text_string_to_metric_families(text):
                held = families.setdefault(family.name, family)
                labelled = [
                    Sample(
                        s.name, {**s.labels, "worker": str(index)}, s.value, s.timestamp, s.exemplar
                    )
                    for s in family.samples
                ]
                if held is family:
                    family.samples = labelled
                else:
                    held.samples.extend(labelled)
    return _exposition(families.values())


class _Families:
    """The families gathered from the workers, as a registry generate_latest can read."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return iter(self.families)


def _exposition(families: Iterable[Metric]) -> str:
    return generate_latest(_Families(families)).decode()


def run_workers(settings: Settings, argv: list[str]) -> int:
    """The parent: bind, migrate, start ``--workers`` workers and keep them running."""
    logs.configure_for(settings)
    try:
        http = _listening_socket(settings.host, settings.http_port)
    except OSError as exc:
        print(
            f"bastion: cannot listen on {settings.host}:{settings.http_port} (--http-port): "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    grpc_port, holder = _grpc_port(settings)
    with closing(http), tempfile.TemporaryDirectory(prefix="bastion-workers-") as tmp:
        run_dir = Path(tmp)
        try:
            trio.run(_run, settings, argv, run_dir, http, grpc_port)
        finally:
            if holder is not None:
                holder.close()
    return 0


async def _run(settings: Settings, argv: list[str], run_dir: Path, http: socket.socket,
               grpc_port: int) -> None:  # fmt: skip
    await _migrate(settings)
    supervisor = _Supervisor(settings, argv, run_dir, http, grpc_port)
    # The one /metrics, served as a single process serves it (HTTPS when TLS is on).
    metrics = HttpServer(
        metrics_app(run_dir, settings.workers), ServerLimits(), tls=tls_context(settings)
    )
    metrics_listeners = await open_listeners(settings.metrics_host, settings.metrics_port)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(supervisor.stop_on_signal, stop)
        await nursery.start(metrics.serve, metrics_listeners, stop)
        for index in range(settings.workers):
            nursery.start_soon(supervisor.keep_running, index)
        log.info("bastion workers started", extra={"workers": settings.workers})
    log.info("stopped")
