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
    # the database flags alone: no admin, client or JWT secret
    flags = ["--database-type=sqlite", f"--database-url={database}"]
    refused = bastion(*server_flags(database), "--migrate=off", cwd=tmp_path)
    assert refused.returncode == 2  # a refused configuration, as --help says
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
    assert started.returncode == 2
    lines = [line for line in started.stderr.splitlines() if line.strip()]
    assert lines == [
        "bastion: this database was migrated by a newer bastion (revision 0099); "
        f"this build knows up to {head_revision()}"
    ], started.stderr


def test_migrate_takes_the_servers_flag_file_as_it_is(tmp_path: Path) -> None:
    """Every server flag in the file is known, so it is accepted; only the database's are
    used. An unknown flag is refused as the server refuses it."""
    database = fresh_sqlite_url(tmp_path)
    flag_file = tmp_path / "server.flags"
    flag_file.write_text("\n".join(server_flags(database)) + "\n")
    dry = bastion("migrate", "--dry-run", f"@{flag_file}", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("pending migrations (oldest first): 0001, ")
    unknown = bastion("migrate", f"@{flag_file}", "--no-such-flag", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "unknown flag --no-such-flag" in unknown.stderr
    missing = bastion("migrate", "--dry-run", cwd=tmp_path)
    assert missing.returncode == 2
    assert "a database is required" in missing.stderr


def test_migrate_help_shows_its_own_flags_and_the_database_flags_only(tmp_path: Path) -> None:
    shown = bastion("migrate", "--help", cwd=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout.startswith("usage: bastion migrate [--dry-run] DATABASE-FLAGS...")
    assert "--dry-run" in shown.stdout
    assert "--database-url" in shown.stdout
    assert "--memory-store-url" in shown.stdout
    for secret in ("--admin-secret", "--client-secret", "--jwt-secret", "--jwt-type"):
        assert secret not in shown.stdout
