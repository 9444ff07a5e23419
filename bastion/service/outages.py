"""A store that keeps failing is logged twice, not once per request: a warning when it
goes down, one when it answers again (with how many calls failed meanwhile), and a
counter (``bastion_store_failures_total``) for every failure in between."""

from __future__ import annotations

import logging

from prometheus_client import Counter

__all__ = ["Outage"]

log = logging.getLogger("bastion.outages")


class Outage:
    """The state of one store as one kind of caller sees it."""

    def __init__(self, store: str, operation: str, failures: Counter) -> None:
        self.store = store
        self.operation = operation
        self._failures = failures.labels(store, operation)
        self._failed_since_down = 0

    @property
    def down(self) -> bool:
        return self._failed_since_down > 0

    def failed(self, exc: BaseException, consequence: str) -> None:
        """``consequence``: what callers get meanwhile (for the operator reading the line)."""
        self._failures.inc()
        self._failed_since_down += 1
        if self._failed_since_down == 1:
            log.warning(
                f"{self.store} unavailable for {self.operation}: {consequence}",
                extra={
                    "store": self.store,
                    "operation": self.operation,
                    "error_type": type(exc).__name__,
                    "error": str(exc),
                },
            )

    def answered(self) -> None:
        if self._failed_since_down:
            log.warning(
                f"{self.store} answers {self.operation} again",
                extra={
                    "store": self.store,
                    "operation": self.operation,
                    "failed_calls": self._failed_since_down,
                },
            )
            self._failed_since_down = 0
