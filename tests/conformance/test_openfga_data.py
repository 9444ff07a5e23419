"""The OpenFGA conformance data, run through our runner in CI: zero failures, full counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bastion.conformance.openfga.runner import main, run_path

REPO = Path(__file__).resolve().parents[2]


#: OpenFGA's own test data, copied verbatim with its licences and provenance (README.md
#: there): the repository carries everything its tests read.
DATA = REPO / "tests" / "data" / "openfga"
LANGUAGE = DATA / "language" / "tests" / "data"
SERVER = DATA / "openfga" / "assets" / "tests"

# Assertions each file holds in our copy (server tests count the _ctxTuples run too).
EXPECTED = {
    SERVER / "consolidated_1_1_tests.yaml": 1408,
    SERVER / "abac_tests.yaml": 384,
    LANGUAGE / "transformer": 58,  # 29 cases, DSL->JSON and JSON->DSL each
    LANGUAGE / "transformer-module": 13,  # 7 cases, one per expected file
    LANGUAGE / "dsl-syntax-validation-cases.yaml": 81,
    LANGUAGE / "dsl-semantic-validation-cases.yaml": 84,  # 91 minus 7 marked skip
    LANGUAGE / "json-validation-cases.yaml": 5,
    LANGUAGE / "json-syntax-transformer-validation-cases.yaml": 6,
    LANGUAGE / "object-id-validation-cases.yaml": 23,
}


@pytest.mark.parametrize("on_demand", [False, True], ids=["direct", "on_demand"])
@pytest.mark.parametrize("path", sorted(EXPECTED), ids=lambda p: p.name)
def test_data_file_passes_completely(path: Path, on_demand: bool) -> None:
    """Over the store directly, and as a server reads it (in rounds, through a cache)."""
    [report] = run_path(path, on_demand=on_demand)
    assert report.failures == []
    assert report.expected == EXPECTED[path]
    assert report.ran == report.expected


def test_cli_prints_summary_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([str(LANGUAGE / "json-validation-cases.yaml")])
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0
    assert lines[-1] == "5 passed, 0 failed"


FAILING_TESTS = """\
tests:
  - name: wrong_expectation
    stages:
      - model: |
          model
            schema 1.1
          type user
          type doc
            relations
              define viewer: [user]
        tuples:
          - user: user:anne
            relation: viewer
            object: doc:1
        checkAssertions:
          - tuple: {user: user:anne, relation: viewer, object: doc:1}
            expectation: false
          - tuple: {user: user:bob, relation: viewer, object: doc:1}
            expectation: false
"""


def test_cli_reports_failures_through_the_module_entry_point(tmp_path: Path) -> None:
    data = tmp_path / "my_tests.yaml"
    data.write_text(FAILING_TESTS)
    result = subprocess.run(
        [sys.executable, "-m", "bastion.conformance", "openfga", str(data)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 1
    # Two assertions, each also run in the contextual-tuples variant.
    assert lines[-1] == "2 passed, 2 failed"
    assert any("wrong_expectation stage 0 check[0]" in line for line in lines)
    assert any("wrong_expectation_ctxTuples stage 0 check[0]" in line for line in lines)


def test_unknown_suite_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bastion.conformance", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "usage" in result.stderr


def test_unknown_yaml_counts_as_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "other.yaml"
    data.write_text("just: data\n")
    assert main([str(data)]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "0 passed, 1 failed"
