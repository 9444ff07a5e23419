"""OpenFGA's own server tests (tests/data/openfga) through bastion's OpenFGA HTTP face, as
``tests/conformance/test_openfga_data.py`` runs them through the engine: zero failures,
full counts, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from bastion.conformance.openfga.face import run_server_tests_over_http
from bastion.conformance.openfga.report import Report
from bastion.conformance.openfga.runner import main
from tests.conformance.test_openfga_data import EXPECTED, FAILING_TESTS, SERVER
from tests.openfga_face.conftest import API_KEY
from tests.server.harness import ServerProcess

FILES = [SERVER / "consolidated_1_1_tests.yaml", SERVER / "abac_tests.yaml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_data_file_passes_through_the_face(face: ServerProcess, path: Path) -> None:
    report = Report(str(path))
    headers = {"authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=face.url, headers=headers, timeout=60) as http:
        run_server_tests_over_http(yaml.safe_load(path.read_text()), report, http)
    assert report.failures == []
    assert report.expected == EXPECTED[path]
    assert report.ran == report.expected


def test_the_runner_reports_failures_through_the_face(
    face: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m bastion.conformance openfga --face URL --key KEY``: a wrong expectation fails."""
    data = tmp_path / "my_tests.yaml"
    data.write_text(FAILING_TESTS)
    code = main(["--face", face.url, "--key", API_KEY, str(data)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert lines[-1] == "2 passed, 2 failed"  # the _ctxTuples run too
    assert "wrong_expectation stage 0 check[0]" in lines[0]
