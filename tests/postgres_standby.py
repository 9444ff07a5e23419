"""A PostgreSQL primary with a streaming standby, for failover tests: initdb and
pg_basebackup into a temporary directory, both servers on loopback ports of the calling
worker's range, run as the unprivileged ``postgres`` user (the server refuses root).
The test promotes the standby and stops both at the end."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.server.harness import free_port

USER = "postgres"


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL's server binaries (initdb) are not installed")
    return Path(found[-1]).parent


def _as_postgres(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    command = [str(a) for a in args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", USER, "--", *command]
    return subprocess.run(command, check=check, capture_output=True, timeout=120)


@dataclass
class Server:
    port: int
    data: Path

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def is_primary(self) -> bool:
        with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
            row = conn.execute("select not pg_is_in_recovery()").fetchone()
            return bool(row and row[0])


@dataclass
class StandbyPair:
    primary: Server
    standby: Server
    bindir: Path

    def url(self, database: str) -> str:
        """A libpq multi-host URL naming both, for whichever accepts writes."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://{USER}@{hosts}/{database}?target_session_attrs=read-write"

    def stop_primary(self) -> None:
        _as_postgres(
            self.bindir / "pg_ctl", "-D", self.primary.data, "-m", "immediate", "stop", check=False
        )

    def stop_standby(self) -> None:
        _as_postgres(
            self.bindir / "pg_ctl", "-D", self.standby.data, "-m", "immediate", "stop", check=False
        )

    def start_standby(self) -> None:
        _start(self.bindir, self.standby)
        _wait_ready(self.standby)

    def promote(self) -> None:
        _as_postgres(self.bindir / "pg_ctl", "-D", self.standby.data, "-w", "promote")


def _start(bindir: Path, server: Server) -> None:
    _as_postgres(
        bindir / "pg_ctl",
        "-D",
        server.data,
        "-l",
        server.data / "server.log",
        "-o",
        f"-p {server.port} -k {server.data} -c listen_addresses=127.0.0.1",
        "-w",
        "start",
    )


def _wait_ready(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.Error), psycopg.connect(server.dsn(), connect_timeout=2):
            return
        time.sleep(0.2)
    raise RuntimeError(f"PostgreSQL on {server.port} did not come up")


@contextlib.contextmanager
def standby_pair(*, synchronous: bool = True) -> Iterator[StandbyPair]:
    """``synchronous``: a commit waits for the standby (failover loses nothing); without
    it the primary commits alone, so the standby may be paused or stopped."""
    bindir = _bindir()
    # pytest's own temporary directories are root-only: the server needs its own.
    root = Path(tempfile.mkdtemp(prefix="bastion-pg-"))
    owner = pwd.getpwnam(USER)
    os.chown(root, owner.pw_uid, owner.pw_gid)
    primary = Server(free_port(), root / "primary")
    standby = Server(free_port(), root / "standby")
    pair = StandbyPair(primary, standby, bindir)
    try:
        _as_postgres(
            bindir / "initdb", "-D", primary.data, "-U", USER, "--auth=trust", "-E", "UTF8"
        )
        with (primary.data / "postgresql.conf").open("a") as conf:
            # Synchronous: a commit is acknowledged once the standby has it, so a
            # promotion loses nothing that was answered.
            conf.write("wal_level = replica\nmax_wal_senders = 5\nfsync = off\n")
            if synchronous:
                conf.write("synchronous_standby_names = '*'\nsynchronous_commit = remote_write\n")
        with (primary.data / "pg_hba.conf").open("a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")
        _start(bindir, primary)
        _wait_ready(primary)
        _as_postgres(
            bindir / "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            USER,
            "-D",
            standby.data,
            "-R",
            "-X",
            "stream",
        )
        with (standby.data / "postgresql.conf").open("a") as conf:
            # Once promoted it stands alone: it must not wait for a standby of its own.
            conf.write("synchronous_standby_names = ''\n")
        _start(bindir, standby)
        _wait_ready(standby)
        yield pair
    finally:
        for server in (standby, primary):
            if server.data.exists():
                _as_postgres(
                    bindir / "pg_ctl", "-D", server.data, "-m", "immediate", "stop", check=False
                )
        shutil.rmtree(root, ignore_errors=True)
