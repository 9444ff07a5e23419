"""The README's first command, word for word, in a fresh copy of the tree with no venv: it
installs with the pip that ``python3 -m venv`` brings and the server it starts becomes ready.

Nothing else checks this: the suite itself runs from a venv that ``scripts/test`` built, so a
first command that cannot install (a dependency on no package index) would go unnoticed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
#: The ports the first command's server takes (its defaults): HTTP, gRPC, metrics.
PORTS = (8080, 9091, 8081)
INSTALL_AND_START_SECONDS = 600


def first_block() -> str:
    found = re.search(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert found, "README has no sh block"
    return found.group(1)


def fresh_copy(into: Path) -> Path:
    """The files a clone would hold (tracked, plus new files not ignored), nothing else."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = REPO / os.fsdecode(name)
        if not source.is_file():
            continue  # deleted in the working tree, not yet committed
        target = into / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        target.chmod(source.stat().st_mode)
    return into


def clean_env() -> dict[str, str]:
    """This shell's environment without the test run's venv: the command makes its own."""
    venv = os.environ.get("VIRTUAL_ENV")
    path = [
        part
        for part in os.environ.get("PATH", "/usr/bin:/bin").split(":")
        if not (venv and part.startswith(venv)) and "/.venv/" not in part + "/"
    ]
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = ":".join(path)
    return env


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_first_command_installs_and_serves_from_a_fresh_copy(tmp_path: Path) -> None:
    taken = [port for port in PORTS if port_taken(port)]
    assert not taken, f"ports {taken} are in use: the first command needs its default ports"
    clone = fresh_copy(tmp_path / "clone")
    assert not (clone / ".venv").exists()
    log = tmp_path / "first-command.log"
    with log.open("wb") as out:
        shell = subprocess.Popen(
            ["bash", "-eo", "pipefail", "-c", first_block()],
            cwd=clone,
            env=clean_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + INSTALL_AND_START_SECONDS
        status = None
        while time.monotonic() < deadline and shell.poll() is None:
            try:
                status = httpx.get("http://localhost:8080/readyz", timeout=2).status_code
            except httpx.TransportError:
                status = None
            if status == 200:
                break
            time.sleep(1)
        output = log.read_text(errors="replace")
        assert shell.poll() is None, f"the first command exited {shell.returncode}:\n{output}"
        assert status == 200, f"not ready after {INSTALL_AND_START_SECONDS} s:\n{output}"
        assert (clone / ".venv" / "bin" / "bastion").exists()
        assert (clone / "bastion.db").exists()
    finally:
        stop(shell)


def stop(shell: subprocess.Popen[bytes]) -> None:
    """The shell and the server it started (one process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(shell.pid, signal.SIGTERM)
    try:
        shell.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
