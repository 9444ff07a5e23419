"""The real command refuses bad configurations before anything listens.

Each test runs ``python -m bastion.cli`` in a subprocess and checks its exit status
and its one stderr line. The process runs in an empty directory holding a ``.env`` file
and with look-alike environment variables set, to show neither is read. The rules
themselves are covered in process by tests/core/test_settings.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

REQUIRED = [
    "--admin-secret=admin-secret",
    "--client-id=client-id",
    "--client-secret=client-secret",
]


def run_bastion(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (cwd / ".env").write_text("ADMIN_SECRET=from-env-file\nDATABASE_URL=env.db\n")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "ADMIN_SECRET": "from-environment",
        "CLIENT_ID": "from-environment",
        "DATABASE_TYPE": "sqlite",
        "DATABASE_URL": "from-environment.db",
    }
    return subprocess.run(
        [sys.executable, "-m", "bastion.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        pytest.param(
            [],
            "bastion: missing required flags: --admin-secret, --client-id, --client-secret, "
            "a database (--database-type with --database-url), --jwt-type (with --jwt-secret, "
            "or --jwt-private-key and --jwt-public-key) (see bastion --help)",
            id="all-required-missing-at-once",
        ),
        pytest.param(
            REQUIRED[1:],
            "bastion: missing required flags: --admin-secret, a database (--database-type "
            "with --database-url), --jwt-type (with --jwt-secret, or --jwt-private-key and "
            "--jwt-public-key) (see bastion --help)",
            id="some-required-missing",
        ),
        pytest.param(
            [*REQUIRED, "--jwt-type=HS256", "--jwt-secret=a-secret-of-enough-length"],
            "bastion: a database is required: give --database-type with --database-url "
            "(or with --database-host and --database-name)",
            id="rule-3-no-database",
        ),
        pytest.param(
            [*REQUIRED, "--database-type=mongodb", "--database-url=mongodb://db/app"],
            "bastion: unsupported --database-type 'mongodb' (NoSQL databases are not "
            "supported); supported: sqlite, postgres, postgresql, mysql, mariadb",
            id="unsupported-database-type",
        ),
        pytest.param(
            [*REQUIRED, "--database_url", "app.db"],
            "bastion: --database_url is not accepted; use --database-url",
            id="old-name",
        ),
    ],
)
def test_refused_configuration_exits_2_with_one_line(
    tmp_path: Path, args: list[str], line: str
) -> None:
    result = run_bastion(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr == line + "\n"
    assert result.stdout == ""


def test_help_exits_0(tmp_path: Path) -> None:
    result = run_bastion(tmp_path, "--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: bastion ")
    assert "  --admin-secret=TEXT  (required)" in result.stdout
    assert result.stderr == ""
