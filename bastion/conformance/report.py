"""The scenario x surface table, the disagreements, the totals line and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from bastion.conformance.runner import FAIL, NA, PASS, SKIP, ScenarioResult

SURFACES = ("rest", "graphql", "grpc")


def totals(results: Sequence[ScenarioResult]) -> tuple[int, int, int]:
    """(passed, failed, skipped) over cells; ``n/a`` cells (rows that do not apply) count
    as neither."""
    cells = [c for r in results for c in r.cells.values()]
    return (
        sum(c.status == PASS for c in cells),
        sum(c.status == FAIL for c in cells),
        sum(c.status == SKIP for c in cells),
    )


def write_text(results: Sequence[ScenarioResult], out: TextIO, footer: Sequence[str] = ()) -> None:
    """The table, failures, disagreements, skips, ``footer`` (one line each), then the
    totals line, always last."""
    width = max([len(r.scenario.name) for r in results] + [8])
    out.write(f"{'scenario':<{width}}  " + "  ".join(f"{s:<7}" for s in SURFACES) + "\n")
    out.write("-" * (width + 2 + 9 * len(SURFACES)) + "\n")
    for result in results:
        row = "  ".join(
            f"{result.cells[s].status if s in result.cells else NA:<7}" for s in SURFACES
        )
        out.write(f"{result.scenario.name:<{width}}  {row}\n")
    notes = [
        (r.scenario.name, surface, cell)
        for r in results
        for surface, cell in r.cells.items()
        if cell.status in (FAIL, SKIP, NA) and cell.detail
    ]
    failures = [n for n in notes if n[2].status == FAIL]
    if failures:
        out.write("\nFailures:\n")
        for name, surface, cell in failures:
            out.write(f"  {name} [{surface}]: {cell.detail}\n")
    disagreements = [d for r in results for d in r.disagreements]
    if disagreements:
        out.write("\nDisagreements between surfaces:\n")
        for d in disagreements:
            out.write(f"  {d.scenario}, {d.step}:\n")
            for surface, answer in d.answers.items():
                out.write(f"    {surface:<8} {answer}\n")
    skipped = sorted({(n, c.status, c.detail) for n, _, c in notes if c.status != FAIL})
    if skipped:
        out.write("\nSkipped / not applicable (by name):\n")
        for name, status, detail in skipped:
            out.write(f"  {name}: {status}: {detail}\n")
    if footer:
        out.write("\n" + "".join(f"{line}\n" for line in footer))
    passed, failed, skipped_count = totals(results)
    out.write(f"\n{passed} passed, {failed} failed, {skipped_count} skipped\n")


def write_junit(results: Sequence[ScenarioResult], path: Path) -> None:
    passed, failed, skipped = totals(results)
    suite = ET.Element(
        "testsuite",
        name="bastion-conformance",
        tests=str(passed + failed + skipped),
        failures=str(failed),
        skipped=str(skipped),
        errors="0",
    )
    for result in results:
        for surface, cell in result.cells.items():
            if cell.status == NA:
                continue
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"conformance.{surface}",
                name=result.scenario.name,
                time=f"{cell.seconds:.3f}",
            )
            if cell.status == FAIL:
                text = "\n".join(
                    f"{d.step}: " + "; ".join(f"{s}: {a}" for s, a in d.answers.items())
                    for d in result.disagreements
                )
                failure = ET.SubElement(case, "failure", message=cell.detail[:500])
                failure.text = text or cell.detail
            elif cell.status == SKIP:
                ET.SubElement(case, "skipped", message=cell.detail)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
