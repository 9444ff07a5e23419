"""Server processes forked from one that imported bastion once.

Most of a server's start is importing it (about 1.5 of 2 CPU seconds, measured:
bench/RESULTS.md, "A server's start and the CI run"), and the suite starts hundreds of
servers on two cores. Each pytest worker keeps one multiprocessing forkserver that
imported ``bastion.cli`` and everything the server imports; a start forks it and runs
``bastion.cli.main`` as the ``bastion`` console script does, with the same arguments,
environment, working directory, standard output and standard error. The process is a
real process with a real pid, stopped by real signals; :class:`ForkedServer` answers the
part of :class:`subprocess.Popen` the tests use.

Tests of the command itself (``--help``, exit codes of refused flags, the README's
commands, the wheels) still run the console script.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from multiprocessing.process import BaseProcess
from pathlib import Path

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["bastion.cli", "bastion.server", "bastion.workers"])


def _serve(argv: list[str], cwd: str, stderr_path: str, env: dict[str, str]) -> None:
    """The child: the console script's ``main`` in the caller's surroundings."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(err, 2)
    os.close(devnull)
    os.close(err)
    sys.argv = [str(Path(sys.executable).with_name("bastion")), *argv]
    from bastion.cli import main

    sys.exit(main(argv))


class ForkedServer:
    """A forked server, with :class:`subprocess.Popen`'s ``pid``, ``returncode``,
    ``poll``, ``wait``, ``send_signal``, ``terminate`` and ``kill``."""

    def __init__(self, argv: list[str], cwd: Path, stderr_path: Path) -> None:
        self.args = argv
        # Daemonic: a server a failed test left running is stopped when its worker ends.
        self._process: BaseProcess = _CONTEXT.Process(
            target=_serve, args=(argv, str(cwd), str(stderr_path), dict(os.environ)), daemon=True
        )
        self._process.start()
        assert self._process.pid is not None
        self.pid: int = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
