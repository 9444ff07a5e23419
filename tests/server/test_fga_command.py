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


def test_the_validator_says_what_the_apis_rule_says() -> None:
    """Asked per shape for plain tuples, it answers as ``_write_problem`` for each tuple,
    first and later of a shape alike."""
    from bastion.core.fga.tuples import TupleKey
    from bastion.fga_tuple_check import Validator
    from bastion.service.fga.base import _write_problem
    from bastion.service.fga.engine import ActiveModel
    from bastion.storage.fga import StoredModel
    from tests.openfga_face.conftest import MODEL_DSL

    model = ActiveModel.load(StoredModel("m", MODEL_DSL))
    keys = [
        TupleKey(f"folder:{obj}", relation, user, condition, context)
        for obj in ("f1", "f2", "*", "a:b", "a b", "x#y", "")
        for relation in ("viewer", "owner", "parent", "nope")
        for user in ("user:anne", "user:bob", "user:*", "group:eng#member", "group:eng#nope",
                     "folder:f1", "folder:f1#viewer", "team:x", "user", "user:a:b", "user:a b")
        for condition, context in (("", None), ("in_window", None), ("nope", None),
                                   ("in_window", {"grant_expiry": "x"}))
    ]  # fmt: skip
    validator = Validator(model)
    for _ in range(2):
        for key in keys:
            assert validator.problem(key) == _write_problem(model, key), key
    assert sum(validator.problem(k) is None for k in keys) >= 5
