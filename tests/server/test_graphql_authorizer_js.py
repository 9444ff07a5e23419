"""The official authorizer-js client (npm ``@authorizerdev/authorizer-js`` 3.0.1) against a
real bastion process: ``tests/authorizer_js/drive.mjs`` runs every step a server-side Node
user needs and exits non-zero on the first one that fails.

Node and npm are required, not optional: without them this test fails (``.ci/run``
installs them).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node_project import node_for
from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, running

PROJECT = Path(__file__).resolve().parents[1] / "authorizer_js"
STEPS = [
    "meta",
    "signup",
    "login",
    "profile",
    "validate_jwt_token",
    "validate_session",
    "session",
    "refresh (/oauth/token)",
    "logout",
]


@pytest.fixture(scope="session")
def node() -> str:
    """``node``, with the pinned client installed from package-lock.json (``npm ci``)."""
    client = PROJECT / "node_modules" / "@authorizerdev" / "authorizer-js" / "package.json"
    return node_for(PROJECT, client, "the authorizer-js test needs Node.js and npm")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("authorizer-js")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


def _drive(node: str, server: ServerProcess, client_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [node, "drive.mjs", server.url, client_id],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_pinned_version_is_installed(node: str) -> None:
    installed = PROJECT / "node_modules" / "@authorizerdev" / "authorizer-js" / "package.json"
    assert '"version": "3.0.1"' in installed.read_text()


def test_every_step_passes(node: str, server: ServerProcess) -> None:
    run = _drive(node, server, CLIENT_ID)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [f"ok {step}" for step in STEPS]


def test_a_failing_step_fails_the_run(node: str, server: ServerProcess) -> None:
    # A client configured for another application is refused from the first call on.
    run = _drive(node, server, "another-client")
    assert run.returncode == 1
    # (authorizer-js reads ``data.meta`` of Authorizer's 400 body and reports a TypeError.)
    [line] = run.stdout.splitlines()
    assert line.startswith("FAIL meta: ")
