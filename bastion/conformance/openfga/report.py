"""Assertion bookkeeping shared by the OpenFGA runners: pass/fail lines and counts."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Report"]


@dataclass
class Report:
    """What one data file produced: failures as lines, and how many assertions ran."""

    source: str
    expected: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def ran(self) -> int:
        return self.passed + self.failed

    def ok(self) -> None:
        self.passed += 1

    def fail(self, where: str, message: str) -> None:
        self.failures.append(f"FAIL {self.source}: {where}: {message}")

    def record(self, where: str, problem: str | None) -> None:
        if problem is None:
            self.ok()
        else:
            self.fail(where, problem)
