"""A bastion server with OpenFGA's API on (``--openfga-api-key``) per database backend,
shared by the tests of this folder (each works in stores of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.harness import ServerProcess, backend_storage, running

API_KEY = "openfga-test-key-0123456789"
FGA = str(Path(sys.executable).with_name("fga"))

MODEL_DSL = """model
  schema 1.1

type user

type group
  relations
    define member: [user, group#member]

type folder
  relations
    define owner: [user]
    define parent: [folder]
    define viewer: [user, user:*, group#member, user with in_window] or owner or viewer from parent

type doc
  relations
    define parent: [folder]
    define blocked: [user]
    define viewer: [user] or viewer from parent
    define can_read: viewer but not blocked

condition in_window(current_time: timestamp, grant_expiry: timestamp) {
  current_time < grant_expiry
}
"""


@pytest.fixture(scope="session", params=["sqlite", "postgres"])
def face(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp(f"openfga-{request.param}")
    storage = backend_storage(request.param, tmp, "openfga")
    with running([*storage.flags, f"--openfga-api-key={API_KEY}"], tmp) as server:
        yield server


def model_json(dsl: str, tmp: Path) -> dict[str, object]:
    """The DSL as JSON, by OpenFGA's own transformer (the CLI), not ours."""
    path = tmp / "model.fga"
    path.write_text(dsl)
    out = subprocess.run(
        [FGA, "model", "transform", "--file", str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HOME": str(tmp)},
    )
    parsed: dict[str, object] = json.loads(out.stdout)
    return parsed
