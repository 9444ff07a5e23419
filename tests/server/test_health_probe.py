"""The container's HEALTHCHECK (``python -m bastion.health_probe``) reads the running
server's flags (a flags file included) and follows its port and scheme: it passes against
an HTTPS server on a chosen port, and fails once the server is gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.dbfixtures import fresh_sqlite_url
from tests.server.certificates import self_signed
from tests.server.harness import base_flags, start_server
from tests.server.test_http_tls import started_https


def probe(pid: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bastion.health_probe", "--pid", str(pid)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_probe_follows_the_servers_port_and_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    flag_file = tmp_path / "tls.flags"
    flag_file.write_text(f"--tls-cert-file={cert}\n--tls-key-file={key}\n")
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path, "probe")), f"@{flag_file}"]
    # The probe reads the server's flags from its command line: the console script's.
    server = start_server(flags, tmp_path, wait=False, name="probe", console_script=True)
    try:
        started_https(server, cert)
        answered = probe(server.process.pid)
        assert answered.returncode == 0, answered.stderr
    finally:
        server.terminate()
    gone = probe(server.process.pid)
    assert gone.returncode == 1
    assert gone.stderr.startswith("bastion health probe: ")


def test_a_process_that_is_not_bastion_is_named() -> None:
    with subprocess.Popen(["sleep", "30"]) as other:
        try:
            refused = probe(other.pid)
        finally:
            other.kill()
    assert refused.returncode == 1
    assert "is not a bastion server: sleep 30" in refused.stderr
