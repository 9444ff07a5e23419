"""Rolling upgrades (issue 42): a build runs on a schema a newer build migrated when the
schema's recorded compatibility window includes it (every migration since its own head
was expand-only), with or without ``--migrate=off``, and refuses one whose window does not
include it, naming both. The window this tree records: its trailing expand-only
migrations (an index, a table) leave revision 0010's build able to run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic.script import ScriptDirectory

from bastion.storage.sql.migrate import VERSION_TABLE, _alembic_config, head_revision
from bastion.storage.sql.schema_window import readable_from
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import base_flags, running
from tests.server.test_auth_flows import login, signup, unique_email
from tests.server.test_migrate_command import bastion, server_flags


def newer_schema(database: str, tmp_path: Path, oldest: str) -> None:
    """The schema as a build one revision ahead leaves it, its window reaching ``oldest``."""
    assert bastion("migrate", *base_flags("sqlite", database), cwd=tmp_path).returncode == 0
    with sqlite3.connect(database) as conn:
        assert conn.execute(
            "select revision, readable_from from service_schema_window"
        ).fetchall() == [
            (head_revision(), readable_from(ScriptDirectory.from_config(_alembic_config())))
        ]
        conn.execute(f"update {VERSION_TABLE} set version_num = '0099'")
        conn.execute(
            "update service_schema_window set revision = '0099', readable_from = ?", (oldest,)
        )


def test_this_trees_window_starts_at_0014_which_partitions_the_tuples() -> None:
    """0014 changes the tuples' keys on PostgreSQL (not expand-only): older builds stop."""
    assert readable_from(ScriptDirectory.from_config(_alembic_config())) == "0014"


def test_a_build_inside_the_window_runs_on_a_newer_schema(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path, "window")
    newer_schema(database, tmp_path, oldest=str(head_revision()))
    for migrate in ("--migrate=off", "--migrate=auto"):
        with (
            running(
                [*base_flags("sqlite", database), migrate], tmp_path, name=migrate[2:]
            ) as server,
            server.client() as client,
        ):
            email = unique_email("window")
            assert signup(client, email).status_code == 200
            assert login(client, email).status_code == 200
        assert "within its compatibility window" in server.stderr()
    dry = bastion("migrate", "--dry-run", *base_flags("sqlite", database), cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr


def test_a_build_outside_the_window_is_refused_naming_both(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path, "outside")
    newer_schema(database, tmp_path, oldest="0098")
    started = bastion(*server_flags(database), cwd=tmp_path)
    assert started.returncode == 2
    assert started.stderr.strip() == (
        "bastion: this database was migrated by a newer bastion (revision 0099) (builds from "
        f"revision 0098 run on it); this build knows up to {head_revision()}"
    )
