"""Authorizer's own published client (``authorizer-proto`` from PyPI) against a bastion server.

The package's ``authorizer.v1`` descriptors and bastion's cannot be loaded in one process, so
the client runs in its own virtualenv (tests/grpc/authorizer_proto_probe.py). The venv lives
under ``~/.cache/bastion-test`` (or the temp directory when that is not writable) and is built
once: ``authorizer-proto`` itself with ``--no-deps`` plus exactly the packages its generated
code imports (protobuf, grpcio and grpcio's typing-extensions), pinned to the versions this
venv runs so pip can reuse its cache. No PyPI means a failure that says so, never a skip.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running

AUTHORIZER_PROTO = "authorizer-proto==0.2.0"  # the descriptors the protos here were taken from
PROBE = Path(__file__).parents[1] / "grpc" / "authorizer_proto_probe.py"
MODEL = """model
  schema 1.1

type user

type doc
  relations
    define viewer: [user]
"""


def _requirements() -> list[str]:
    deps = ("protobuf", "grpcio", "typing-extensions")
    return [AUTHORIZER_PROTO, *(f"{name}=={version(name)}" for name in deps)]


def _cache_root() -> Path:
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bastion-test"
    try:
        home.mkdir(parents=True, exist_ok=True)
        probe = home / f".writable-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        home = Path(tempfile.gettempdir()) / "bastion-test"
        home.mkdir(parents=True, exist_ok=True)
    return home


def _run(args: list[str], what: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        pytest.fail(
            f"{what} failed (is PyPI reachable? this test installs {AUTHORIZER_PROTO} from it):\n"
            f"{done.stderr[-3000:]}",
            pytrace=False,
        )


@pytest.fixture(scope="module")
def probe_python() -> Path:
    """The separate venv's interpreter, built once and reused while its requirements hold."""
    root = _cache_root()
    venv = root / "authorizer-proto-venv"
    stamp = venv / "bastion-requirements.txt"
    wanted = "\n".join(_requirements())
    with (root / "authorizer-proto-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time across xdist workers and runs
        if not stamp.exists() or stamp.read_text() != wanted:
            _run([sys.executable, "-m", "venv", "--clear", str(venv)], "creating the venv")
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            _run([*pip, "--no-deps", *_requirements()], f"pip install {AUTHORIZER_PROTO}")
            stamp.write_text(wanted)
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("authorizer-proto")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


def _lines(process: subprocess.Popen[str]) -> Iterator[dict[str, object]]:
    assert process.stdout is not None
    for line in process.stdout:
        yield json.loads(line)


def test_authorizer_clients_generated_stubs_work_against_bastion(
    probe_python: Path, server: ServerProcess
) -> None:
    admin = {"x-service-admin-secret": ADMIN_SECRET, "origin": server.url}
    written = httpx.post(
        f"{server.url}/v1/admin/fga/model", json={"dsl": MODEL}, headers=admin, timeout=30
    )
    assert written.status_code == 200, written.text

    process = subprocess.Popen(
        [str(probe_python), str(PROBE), f"127.0.0.1:{server.grpc_port}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: dict[str, dict[str, object]] = {}
    try:
        for report in _lines(process):
            seen[str(report["rpc"])] = report
            if report["rpc"] == "Profile":
                # The probe's user is the subject: grant it viewer on doc:probe, then let it check.
                grant = {
                    "user": f"user:{report['id']}",
                    "relation": "viewer",
                    "object": "doc:probe",
                }
                tuples = httpx.post(
                    f"{server.url}/v1/admin/fga/tuples",
                    json={"tuples": [grant]},
                    headers=admin,
                    timeout=30,
                )
                assert tuples.status_code == 200, tuples.text
                assert process.stdin is not None
                process.stdin.write("\n")
                process.stdin.close()
        returncode = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    errors = process.stderr.read()
    process.stderr.close()
    assert process.stdout is not None
    process.stdout.close()
    assert returncode == 0, errors
    assert list(seen) == ["Meta", "Signup", "Login", "Profile", "CheckPermissions"]
    assert seen["Meta"]["is_sign_up_enabled"] is True
    assert seen["CheckPermissions"]["results"] == [
        ["viewer", "doc:probe", True],
        ["viewer", "doc:other", False],
    ]
