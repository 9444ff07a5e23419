"""``python -m bastion.conformance openfga [--face URL --key KEY] FILE_OR_DIR...``: run OpenFGA
data files, report counts.

With ``--face``, server test files run through a deployment's OpenFGA HTTP API (bastion's
``--openfga-api-key`` face, or an OpenFGA server) instead of the embedded engine.

Each argument is a server test YAML, a language data YAML, a ``transformer`` or
``transformer-module`` case folder (or a folder of them), or a folder holding any of
these. One line per failing assertion, then ``N passed, M failed`` as the last line. The
exit status is non-zero when an assertion failed, or when the number of assertions run
differs from the number the file holds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import yaml

from bastion.conformance.openfga import language_tests
from bastion.conformance.openfga.face import run_server_tests_over_http
from bastion.conformance.openfga.report import Report
from bastion.conformance.openfga.server_tests import is_server_test_file, run_server_tests

__all__ = ["main", "run_path"]


def _run_yaml(path: Path, face: httpx.Client | None, on_demand: bool) -> Report:
    report = Report(str(path))
    data = yaml.safe_load(path.read_text())
    if is_server_test_file(data) and face is not None:
        run_server_tests_over_http(data, report, face)
    elif is_server_test_file(data):
        run_server_tests(data, report, on_demand=on_demand)
    elif language_tests.handles(path.name):
        language_tests.run_file(path.name, data, report)
    else:
        report.expected += 1
        report.fail("file", "not a known OpenFGA data format")
    return report


_CASE_FOLDERS: list[tuple[Callable[[Path], bool], Callable[[Path, Report], None]]] = [
    (language_tests.is_transformer_case, language_tests.run_transformer_case),
    (language_tests.is_module_case, language_tests.run_module_case),
]


def run_path(
    path: Path, face: httpx.Client | None = None, *, on_demand: bool = False
) -> list[Report]:
    """Reports for one file or folder (folders are searched for known data); ``face``:
    server tests over that OpenFGA HTTP API; ``on_demand``: in process, evaluated as a
    server reads its store (in rounds, through a cache)."""
    if path.is_file():
        return [_run_yaml(path, face, on_demand)]
    for is_case, run_case in _CASE_FOLDERS:
        if is_case(path):
            report = Report(str(path))
            run_case(path, report)
            return [report]
    reports: list[Report] = []
    cases: list[Path] = []
    for is_case, run_case in _CASE_FOLDERS:
        found = [c for c in sorted(path.iterdir()) if c.is_dir() and is_case(c)]
        if found:
            report = Report(str(path))
            for case in found:
                run_case(case, report)
            reports.append(report)
            cases.extend(found)
    for child in sorted(path.iterdir()):
        if child in cases:
            continue
        if child.is_dir() or (
            child.suffix == ".yaml"
            and (language_tests.handles(child.name) or child.name.endswith("tests.yaml"))
        ):
            reports.extend(run_path(child, face, on_demand=on_demand))
    return reports


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="bastion-conformance openfga")
    parser.add_argument("--face", help="base URL of an OpenFGA HTTP API to run server tests on")
    parser.add_argument("--key", default="", help="its pre-shared key (Bearer)")
    parser.add_argument("paths", nargs="*", metavar="FILE_OR_DIR")
    args = parser.parse_args(argv)
    if not args.paths:
        parser.print_usage(sys.stderr)
        return 2
    if args.face:
        headers = {"authorization": f"Bearer {args.key}"} if args.key else {}
        with httpx.Client(base_url=args.face, headers=headers, timeout=60) as face:
            reports = [r for arg in args.paths for r in run_path(Path(arg), face)]
    else:
        reports = [r for arg in args.paths for r in run_path(Path(arg))]
    passed = sum(r.passed for r in reports)
    failed = sum(r.failed for r in reports)
    bad_count = False
    for report in reports:
        for line in report.failures:
            print(line)
        if report.ran != report.expected:
            bad_count = True
            print(
                f"COUNT {report.source}: ran {report.ran} assertions, file holds {report.expected}"
            )
    for report in reports:
        print(f"# {report.source}: {report.passed} passed, {report.failed} failed")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or bad_count or not reports else 0
