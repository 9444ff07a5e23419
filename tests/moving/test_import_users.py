"""``bastion import users`` and ``bastion export users``: one user per password hash format
(tests/moving/hash_vectors.json) imported and signed in over REST, bad lines reported by
number and skipped, and export -> import -> export giving the same file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import BASTION, base_flags, running

pytestmark = pytest.mark.slow

VECTORS: dict[str, Any] = json.loads((Path(__file__).with_name("hash_vectors.json")).read_text())
FIREBASE = VECTORS["firebase"]
FIREBASE_FLAGS = [
    f"--firebase-signer-key={FIREBASE['signer_key']}",
    f"--firebase-salt-separator={FIREBASE['salt_separator']}",
    f"--firebase-rounds={FIREBASE['rounds']}",
    f"--firebase-mem-cost={FIREBASE['mem_cost']}",
]


def bastion(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASTION, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def database(tmp: Path, name: str) -> list[str]:
    flags = ["--database-type=sqlite", f"--database-url={fresh_sqlite_url(tmp, name)}"]
    assert bastion("migrate", *flags, cwd=tmp).returncode == 0
    return flags


def users_file(tmp: Path) -> tuple[Path, dict[str, str]]:
    """One user per hash format (a password each), then lines that must be skipped."""
    passwords, lines = {}, []
    for number, vector in enumerate(VECTORS["vectors"]):
        email = f"{vector['source'].split()[0].lower()}-{number}@example.com"
        passwords[email] = vector["password"]
        lines.append({
            "email": email, "email_verified": True, "password_hash": vector["hash"],
            "given_name": vector["format"], "app_data": {"from": vector["source"]},
        })  # fmt: skip
    passwords["firebase@example.com"] = FIREBASE["password"]
    lines.append({
        "email": "firebase@example.com", "email_verified": True,
        "password_hash": FIREBASE["hash"], "password_salt": FIREBASE["salt"],
    })  # fmt: skip
    path = tmp / "users.jsonl"
    bad = [
        "{not json",
        json.dumps({"email": "odd@example.com", "favourite_colour": "blue"}),
        json.dumps({"email": "not-an-address", "password_hash": VECTORS["vectors"][0]["hash"]}),
        json.dumps(
            {"email": "md5@example.com", "password_hash": "5f4dcc3b5aa765d61d8327deb882cf99"}
        ),
        json.dumps({"id": "someone-else", "email": lines[0]["email"].upper()}),
        json.dumps({"email": "boss@example.com", "roles": ["overlord"]}),
    ]
    path.write_text("\n".join([*(json.dumps(line) for line in lines), "", *bad]) + "\n")
    return path, passwords


def test_every_hash_format_signs_in_and_bad_lines_are_reported(tmp_path: Path) -> None:
    flags = database(tmp_path, "users")
    path, passwords = users_file(tmp_path)
    done = bastion("import", "users", str(path), *flags, *FIREBASE_FLAGS, "--roles=user,editor",
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    good, first_bad = len(passwords), len(passwords) + 2  # a blank line between
    assert f"users: {good} imported, 0 updated, 0 unchanged, 6 skipped" in done.stdout
    expected = {
        first_bad: "not JSON",
        first_bad + 1: "unknown field 'favourite_colour'",
        first_bad + 2: "email is not a valid address",
        first_bad + 3: "password_hash is unusable: not a known hash format",
        first_bad + 4: "its email belongs to another account",
        first_bad + 5: "roles holds 'overlord', which is not one of the server's --roles",
    }
    for number, reason in expected.items():
        assert any(
            f"line {number}" in line and reason in line for line in done.stdout.splitlines()
        ), (number, reason, done.stdout)
    again = bastion(
        "import", "users", str(path), *flags, *FIREBASE_FLAGS, "--roles=user,editor", cwd=tmp_path
    )
    assert f"users: 0 imported, 0 updated, {good} unchanged, 6 skipped" in again.stdout

    server_flags = base_flags("sqlite", flags[1].split("=", 1)[1])
    with running(server_flags, tmp_path) as server, server.client() as client:
        for email, password in passwords.items():
            wrong = client.post("/v1/login", json={"email": email, "password": password + "x"})
            assert wrong.status_code == 401, email
            signed_in = client.post("/v1/login", json={"email": email, "password": password})
            assert signed_in.status_code == 200, (email, signed_in.text)
        hashes = exported_hashes(tmp_path, flags)
    # every imported hash was replaced by argon2id at its first sign-in
    assert all(h.startswith("$argon2id$") for h in hashes.values()), hashes
    with running(server_flags, tmp_path) as server, server.client() as client:
        for email, password in passwords.items():
            login = client.post("/v1/login", json={"email": email, "password": password})
            assert login.status_code == 200, email


def exported_hashes(tmp: Path, flags: list[str]) -> dict[str, str]:
    done = bastion("export", "users", "-", *flags, cwd=tmp)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return {r["email"]: r["password_hash"] for r in records if "password_hash" in r}


def test_export_then_import_into_an_empty_database_round_trips(tmp_path: Path) -> None:
    first, second = database(tmp_path, "first"), database(tmp_path, "second")
    path, _ = users_file(tmp_path)
    assert (
        bastion("import", "users", str(path), *first, *FIREBASE_FLAGS, cwd=tmp_path).returncode == 0
    )
    exported = tmp_path / "exported.jsonl"
    done = bastion("export", "users", str(exported), *first, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # every good line, and the user whose role only a server's --roles refuses
    assert done.stdout.strip() == f"exported {len(VECTORS['vectors']) + 2} users"
    dry = bastion("import", "users", str(exported), *second, "--dry-run", cwd=tmp_path)
    assert "dry run: nothing was written" in dry.stdout
    assert bastion("export", "users", "-", *second, cwd=tmp_path).stdout == ""
    moved = bastion("import", "users", str(exported), *second, cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    assert bastion("export", "users", "-", *second, cwd=tmp_path).stdout == exported.read_text()


def test_a_firebase_line_without_the_projects_parameters_is_named(tmp_path: Path) -> None:
    flags = database(tmp_path, "fb")
    path, _ = users_file(tmp_path)
    partial = bastion("import", "users", str(path), *flags, FIREBASE_FLAGS[0], cwd=tmp_path)
    assert partial.returncode == 2
    assert "missing --firebase-salt-separator" in partial.stderr
    assert bastion("export", "users", "-", *flags, cwd=tmp_path).stdout == ""
    done = bastion("import", "users", str(path), *flags, cwd=tmp_path)
    assert "password_salt is for Firebase hashes" in done.stdout
    exported = bastion("export", "users", "-", *flags, cwd=tmp_path).stdout.splitlines()
    assert len(exported) == len(VECTORS["vectors"]) + 1  # every other good line went in
