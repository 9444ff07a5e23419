"""Node.js test projects (a package.json and its lock file under tests/): the ``node``
binary, with the project's packages installed by ``npm ci`` the first time."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["node_for"]


def node_for(project: Path, installed: Path, why: str) -> str:
    """``node``, once ``installed`` (a file ``npm ci`` puts in ``project``) exists; a test
    fails, never skips, when Node.js or npm is missing (``why`` says what needs them)."""
    node = _tool("node", why)
    if not installed.exists():
        subprocess.run(
            [_tool("npm", why), "ci", "--no-audit", "--no-fund"],
            cwd=project,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return node


def _tool(name: str, why: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not installed: {why}")
    return path
