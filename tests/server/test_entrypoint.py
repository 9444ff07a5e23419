"""The container entrypoint hands its arguments to bastion unchanged (no Docker engine here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy" / "entrypoint.sh"


def test_arguments_reach_bastion_unchanged(tmp_path: Path) -> None:
    fake = tmp_path / "bastion"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    args = [
        "--admin-secret=a b$c",
        "--allowed-origins",
        "https://x.test,*.y.test",
        "@/run/flags",
        "",
        "--x='q'",
    ]
    out = subprocess.run(
        [str(ENTRYPOINT), *args],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "PATH": f"{tmp_path}:{os.environ['PATH']}",
            "BASTION_ADMIN_SECRET": "ignored",
        },
    )
    assert json.loads(out.stdout) == args


def test_containerfile_uses_the_entrypoint() -> None:
    text = (ENTRYPOINT.parents[1] / "Containerfile").read_text()
    assert 'ENTRYPOINT ["/usr/local/bin/bastion-entrypoint"]' in text
    assert "COPY deploy/entrypoint.sh /usr/local/bin/bastion-entrypoint" in text
