"""The README's first command and its curl walk-through stay true: the server starts with
exactly the flags the README gives (only the database file and the ports moved into the
test's own), and the walk-through's lines print exactly what the README says they print."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from tests.server.harness import free_port, running

README = Path(__file__).resolve().parents[2] / "README.md"


def block(name: str) -> str:
    """The fenced block between ``<!-- name -->`` and ``<!-- /name -->``."""
    text = README.read_text()
    found = re.search(rf"<!-- {name} -->\n```\w*\n(.*?)```\n<!-- /{name} -->", text, re.S)
    assert found, f"README has no {name} block"
    return found.group(1)


def start_command_flags() -> list[str]:
    """The bastion flags of the README's first command (the one that starts the server)."""
    text = README.read_text()
    first = re.search(r"```sh\n(.*?)\n```", text, re.S)
    assert first
    (command,) = [part for part in first.group(1).split("&&") if "bin/bastion" in part]
    words = shlex.split(command)
    return words[1:]


def test_the_first_command_names_every_required_flag() -> None:
    flags = start_command_flags()
    for required in ("--admin-secret", "--client-id", "--client-secret", "--database-type"):
        assert required in flags


def test_the_curl_walkthrough_prints_what_the_readme_says(tmp_path: Path) -> None:
    assert shutil.which("curl"), "the walk-through needs curl (.ci/run installs it)"
    assert shutil.which("jq"), "the walk-through needs jq (.ci/run installs it)"
    flags = start_command_flags()
    # The database file moves into the test's directory; everything else is as written.
    flags[flags.index("--database-url") + 1] = str(tmp_path / "walkthrough.db")
    port = free_port()
    url = f"http://localhost:{port}"
    with running([*flags, f"--url={url}"], tmp_path, http_port=port):
        result = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", block("walkthrough")],
            cwd=tmp_path,
            env={"B": url, "PATH": "/usr/bin:/bin:/usr/local/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout == block("walkthrough-output"), result.stderr
