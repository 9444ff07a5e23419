"""``bastion fga import`` / ``export`` as commands: their help, their arguments, and the
stores they refuse, as real processes on a real SQLite file (the imports themselves:
``tests/openfga_face/test_bulk.py`` and ``tests/storage/test_fga_bulk.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.dbfixtures import fresh_sqlite_url
from tests.server.test_migrate_command import bastion


def test_help_names_the_commands_own_flags_and_the_store_flags(tmp_path: Path) -> None:
    done = bastion("fga", "import", "--help", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith(
        "usage: bastion fga import [--store ID] [--format FORMAT] DATABASE-FLAGS... FILE"
    )
    for flag in ("--store ID", "--database-url", "--memory-store-url", "--fga-store-url"):
        assert f"  {flag}\n" in done.stdout
    export = bastion("fga", "export", "--help", cwd=tmp_path)
    assert "DATABASE-FLAGS... [FILE]" in export.stdout.splitlines()[0]


def test_arguments_and_stores_that_are_refused(tmp_path: Path) -> None:
    database = ["--database-type=sqlite", f"--database-url={fresh_sqlite_url(tmp_path)}"]
    nothing = bastion("fga", cwd=tmp_path)
    assert nothing.returncode == 2
    assert "bastion fga import|export" in nothing.stderr
    two = bastion("fga", "import", *database, "a.csv", "b.csv", cwd=tmp_path)
    assert two.returncode == 2
    assert "takes FILE; got 2 argument(s)" in two.stderr
    unknown = bastion("fga", "export", *database, "--colour=red", cwd=tmp_path)
    assert (unknown.returncode, "unknown flag --colour" in unknown.stderr) == (2, True)
    memory = bastion("fga", "import", *database, "--fga-store=memory", "a.csv", cwd=tmp_path)
    assert memory.returncode == 1
    assert "--fga-store memory: the server keeps no authorization store" in memory.stderr
    no_url = bastion("fga", "export", *database, "--fga-store=postgres", cwd=tmp_path)
    assert no_url.returncode == 2
    assert "--fga-store postgres needs --fga-store-url" in no_url.stderr
    stdin = bastion("fga", "import", *database, "-", cwd=tmp_path)
    assert stdin.returncode == 1
    assert "cannot tell the format of '-'" in stdin.stderr
