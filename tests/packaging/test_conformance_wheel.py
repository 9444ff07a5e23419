"""``bastion-conformance`` as a QA engineer installs it (issue 38): its wheel, built from this
tree, put into a fresh virtual environment with nothing else, brings none of the server's
dependencies, and its command runs from there (never from the checkout) against a server."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conformance.test_qa_tool import readme_flags
from tests.dbfixtures import fresh_sqlite_url
from tests.packaging.test_wheels import (
    LEFT_BEHIND,
    REPO,
    _env,
    _installed,
    _pip_install,
    _run,
    _venv,
)
from tests.server.harness import ADMIN_SECRET, CLIENT_ID, running

pytestmark = pytest.mark.slow

#: The server's distributions and dependencies: none may come with the suite.
SERVER = {
    "bastion", "bastion-core", "sqlalchemy", "alembic", "asyncpg", "psycopg", "pymysql",
    "redis", "hiredis", "mini-racer", "starlette", "hypercorn", "trio", "trio-asyncio",
    "jinja2", "webauthn", "authlib", "prometheus-client", "argon2-cffi", "bcrypt",
}  # fmt: skip


def test_the_suite_installs_alone_and_runs_from_its_venv(tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=LEFT_BEHIND)
    out = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
         "-w", str(out), str(source / "packages" / "bastion-conformance")],
        source,
    )  # fmt: skip
    (wheel,) = out.glob("bastion_conformance-0.1.0-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"bastion", "bastion_conformance-0.1.0.dist-info"}
    assert "bastion/conformance/cli.py" in names
    assert "bastion/transports/grpc/proto/authorizer/v1/admin_pb2.py" in names
    assert not [n for n in names if n.startswith(("bastion/core/", "bastion/service/"))]
    assert "bastion/__init__.py" not in names, "bastion is a namespace package"

    python = _venv(tmp_path / "venv")
    _pip_install(python, str(wheel))
    installed = set(_installed(python))
    assert "bastion-conformance" in installed
    assert not installed & SERVER, installed & SERVER

    command = str(python.parent / "bastion-conformance")
    usage = _run([command, "--help"], tmp_path)
    assert "bastion-conformance coverage REPORT.xml" in usage
    assert "bastion-conformance openfga" in usage
    with running(readme_flags(fresh_sqlite_url(tmp_path)), tmp_path) as server:
        done = subprocess.run(
            [command, "--base-url", server.url, "--grpc", f"127.0.0.1:{server.grpc_port}",
             "--admin-secret", ADMIN_SECRET, "--client-id", CLIENT_ID, "--only", "meta"],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().splitlines()[-1] == "3 passed, 0 failed, 0 skipped", done.stdout
