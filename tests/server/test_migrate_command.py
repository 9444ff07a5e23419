"""``bastion migrate``, ``--migrate=off``, ``--version``, and a schema from a newer build:
real processes on a real SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from bastion.storage.sql.migrate import VERSION_TABLE, head_revision
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import BASTION, base_flags, free_port


def bastion(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASTION, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def server_flags(database: str) -> list[str]:
    ports = [f"--http-port={free_port()}", f"--grpc-port={free_port()}"]
    return [*base_flags("sqlite", database), *ports, f"--metrics-port={free_port()}"]


def test_version(tmp_path: Path) -> None:
    done = bastion("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("bastion ")


def test_migrate_applies_then_the_server_starts_with_migrations_off(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path)
    flags = base_flags("sqlite", database)
    refused = bastion(*server_flags(database), "--migrate=off", cwd=tmp_path)
    assert refused.returncode == 1
    assert "the database schema is behind this build" in refused.stderr
    assert "run `bastion migrate`" in refused.stderr
    dry = bastion("migrate", "--dry-run", *flags, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("pending migrations (oldest first): 0001, ")
    assert f", {head_revision()}" in dry.stdout
    with sqlite3.connect(database) as conn:  # a dry run changed nothing
        tables = {r[0] for r in conn.execute("select name from sqlite_master")}
    assert "service_users" not in tables
    applied = bastion("migrate", *flags, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert f"migrated from revision none to {head_revision()}" in applied.stdout
    again = bastion("migrate", *flags, cwd=tmp_path)
    assert "the schema is current" in again.stdout


def test_a_schema_from_a_newer_build_is_named_in_one_line(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path)
    flags = base_flags("sqlite", database)
    assert bastion("migrate", *flags, cwd=tmp_path).returncode == 0
    with sqlite3.connect(database) as conn:
        conn.execute(f"update {VERSION_TABLE} set version_num = '0099'")
    started = bastion(*server_flags(database), cwd=tmp_path)
    assert started.returncode == 1
    lines = [line for line in started.stderr.splitlines() if line.strip()]
    assert lines == [
        "bastion: this database was migrated by a newer bastion (revision 0099); "
        f"this build knows up to {head_revision()}"
    ], started.stderr
