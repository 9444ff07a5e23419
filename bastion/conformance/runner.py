"""Run the catalogue through every surface, compare the answers, grade each cell.

A cell is one scenario on one surface: ``pass``, ``fail``, ``skip`` (the deployment has
the feature off, or the scenario needs --destructive) or ``n/a`` (the row does not apply
to that surface: HTTP-only rows on gRPC, a request the surface cannot express). A
scenario whose transcripts differ between surfaces fails on the surfaces that answered
unlike the majority (all of them when there is none), and every differing step is
reported with every surface's answer.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bastion.conformance.discovery import Deployment
from bastion.conformance.scenario import Ctx, Failure, NotOffered, Scenario, Skip, Step
from bastion.conformance.surfaces.base import Surface, Unexpressible

PASS, FAIL, SKIP, NA = "pass", "fail", "skip", "n/a"
#: Differing steps shown per scenario (later ones usually follow from the first).
MAX_DIFFS_SHOWN = 3


@dataclass
class Cell:
    status: str
    detail: str = ""
    #: Wall time the scenario took on this surface, cleanup included (JUnit's ``time``).
    seconds: float = 0.0


@dataclass
class Disagreement:
    scenario: str
    step: str
    answers: dict[str, str]


@dataclass
class ScenarioResult:
    scenario: Scenario
    cells: dict[str, Cell] = field(default_factory=dict)
    disagreements: list[Disagreement] = field(default_factory=list)


def selected(catalogue: Sequence[Scenario], only: str | None) -> list[Scenario]:
    if not only:
        return list(catalogue)
    return [s for s in catalogue if fnmatch.fnmatch(s.name, only) or only in s.name]


def _run_one(
    scenario: Scenario, surface: Surface, deployment: Deployment
) -> tuple[Cell, list[Step]]:
    ctx = Ctx(surface, deployment, scenario)
    started = time.perf_counter()
    try:
        scenario.run(ctx)
        cell = Cell(PASS)
    except Skip as skip:
        cell = Cell(SKIP, str(skip))
    except NotOffered as missing:
        cell = Cell(SKIP, f"{missing.operation} is not offered on {surface.name}")
    except Unexpressible as exc:
        cell = Cell(NA, f"not expressible on {surface.name}: {exc}")
    except Failure as failure:
        cell = Cell(FAIL, str(failure))
    except Exception as exc:  # a transport failure is this surface's failure, not the suite's
        cell = Cell(FAIL, f"{type(exc).__name__}: {exc}")
    finally:
        for undo in reversed(ctx.cleanups):
            # Cleanup is best effort: what it could not remove is uniquely named.
            with contextlib.suppress(Exception):
                undo()
    if ctx.anomalies and cell.status in (PASS, FAIL):
        slips = "; ".join(ctx.anomalies)
        cell = Cell(FAIL, f"{cell.detail}; {slips}" if cell.status == FAIL else slips)
    cell.seconds = time.perf_counter() - started
    return cell, ctx.transcript


def _compare(result: ScenarioResult, transcripts: dict[str, list[Step]]) -> None:
    compared = {
        name: steps
        for name, steps in transcripts.items()
        if result.cells[name].status in (PASS, FAIL)
    }
    if len(compared) < 2:
        return
    length = max(len(steps) for steps in compared.values())
    odd: set[str] = set()
    for index in range(length):
        forms = {
            name: repr(steps[index].form) if index < len(steps) else "<no such step>"
            for name, steps in compared.items()
        }
        if len(set(forms.values())) == 1:
            continue
        counts = Counter(forms.values())
        top, votes = counts.most_common(1)[0]
        majority = top if votes > len(forms) / 2 else None
        odd |= {name for name, form in forms.items() if form != majority}
        if len(result.disagreements) < MAX_DIFFS_SHOWN:
            label = next(
                (steps[index].label for steps in compared.values() if index < len(steps)), "?"
            )
            result.disagreements.append(
                Disagreement(
                    result.scenario.name,
                    f"step {index + 1} ({label})",
                    {
                        name: _shown(steps[index].form)
                        if index < len(steps)
                        else "<the scenario ended before this step>"
                        for name, steps in compared.items()
                    },
                )
            )
    for name in odd:
        cell = result.cells[name]
        reason = "answered unlike the other surfaces (see disagreements)"
        result.cells[name] = Cell(FAIL, f"{cell.detail}; {reason}" if cell.detail else reason)


def _shown(form: dict[str, object]) -> str:
    """The compared (normalised) answer: what differs is exactly what is shown."""
    return json.dumps(form, sort_keys=True, default=str)


def run_scenario(
    scenario: Scenario, surfaces: dict[str, Surface | None], deployment: Deployment
) -> ScenarioResult:
    result = ScenarioResult(scenario)
    reason = None
    if scenario.destructive and not deployment.destructive:
        reason = "changes global state: runs only with --destructive"
    elif scenario.requires is not None:
        reason = scenario.requires(deployment)
    transcripts: dict[str, list[Step]] = {}
    for name, surface in surfaces.items():
        if name not in scenario.surfaces:
            result.cells[name] = Cell(NA, f"the row applies to {', '.join(scenario.surfaces)} only")
        elif surface is None:
            result.cells[name] = Cell(SKIP, f"no {name} target given")
        elif reason is not None:
            result.cells[name] = Cell(SKIP, reason)
        else:
            result.cells[name], transcripts[name] = _run_one(scenario, surface, deployment)
    _offered_somewhere(result)
    _compare(result, transcripts)
    return result


def _offered_somewhere(result: ScenarioResult) -> None:
    """An operation missing on some surfaces but served on others is a failure there."""
    missing = {
        name: cell
        for name, cell in result.cells.items()
        if cell.status == SKIP and " is not offered on " in cell.detail
    }
    if missing and any(c.status in (PASS, FAIL) for c in result.cells.values()):
        for name, cell in missing.items():
            result.cells[name] = Cell(FAIL, f"{cell.detail}, but other surfaces offer it")


def run_catalogue(
    catalogue: Sequence[Scenario],
    surfaces: dict[str, Surface | None],
    deployment: Deployment,
    progress: Callable[[ScenarioResult], None] | None = None,
) -> list[ScenarioResult]:
    results = []
    for scenario in catalogue:
        result = run_scenario(scenario, surfaces, deployment)
        if progress is not None:
            progress(result)
        results.append(result)
    return results
