"""Which rows no deployment covered: a row is covered when one of its cells passed in
some run. ``bastion-conformance coverage REPORT.xml...`` reads the JUnit reports of
several runs (``--junit``) and names the rows still uncovered, with the profile that
would cover each (exit 1 when any is)."""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from pathlib import Path

from bastion.conformance.profiles import profile_for


def passed_rows(report: Path) -> set[str]:
    """Rows with at least one passing cell in a JUnit report of the suite."""
    rows: set[str] = set()
    # The suite reads its own reports (written by --junit), not untrusted XML.
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        if case.find("failure") is None and case.find("skipped") is None:
            rows.add(str(case.get("name")))
    return rows


def uncovered(catalogue: Iterable[str], passed: set[str]) -> list[str]:
    return [row for row in catalogue if row not in passed]


def lines(rows: Sequence[str]) -> list[str]:
    if not rows:
        return ["every row passed on at least one surface"]
    return [f"rows not covered ({len(rows)}):"] + [
        f"  {row} (profile {profile_for(row).name})" for row in rows
    ]


def main(argv: Sequence[str]) -> int:
    from bastion.conformance import catalogue
    from bastion.conformance.fuzz import FUZZ_ROW

    p = argparse.ArgumentParser(
        prog="bastion-conformance coverage",
        description="Name the rows no run covered, over the JUnit reports of several runs "
        "(--junit); exit 1 when any, 2 when a report cannot be read.",
    )
    p.add_argument("reports", nargs="+", type=Path, metavar="REPORT.xml")
    args = p.parse_args(argv)
    passed: set[str] = set()
    for path in args.reports:
        try:
            passed |= passed_rows(path)
        except (OSError, ET.ParseError) as exc:
            print(f"cannot read {path}: {exc}", file=sys.stderr)
            return 2
    rows = uncovered([s.name for s in catalogue.CATALOGUE] + [FUZZ_ROW], passed)
    print("\n".join(lines(rows)))
    return 1 if rows else 0
