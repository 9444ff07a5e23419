"""Request inputs and the per-request evaluation context shared by every API.

A request's view of the tuples is the store overlaid with its contextual tuples (validated
strictly: a bad one is 2027) and read through the current model: tuples the model would
not admit today are skipped, and conditioned tuples are evaluated against the request
context overlaid by the tuple's stored context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bastion.core.fga.cel import ConditionError
from bastion.core.fga.cel_cost import DEFAULT_MAX_CONDITION_COST
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.tuples import CombinedReader, MemoryTupleReader, TupleKey, TupleReader
from bastion.core.fga.typesystem import TypeSystem

__all__ = [
    "DEFAULT_LIST_DEADLINE",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_RESULTS",
    "Deadline",
    "RequestContext",
    "RequestOptions",
]

#: OpenFGA's resolveNodeLimit: the 25th tuple hop fails with 2002.
DEFAULT_MAX_DEPTH = 25
#: OpenFGA's listObjectsMaxResults / listUsersMaxResults.
DEFAULT_MAX_RESULTS = 1000
#: Seconds: OpenFGA's listObjectsDeadline / listUsersDeadline.
DEFAULT_LIST_DEADLINE = 3.0


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a ListObjects or ListUsers evaluation stops and answers with what it has
    confirmed so far: ``at`` on the scale of ``clock`` (the caller's; the core keeps
    none)."""

    at: float
    clock: Callable[[], float]

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float]) -> Deadline | None:
        """``seconds`` from now; ``None`` (no deadline) for 0, as OpenFGA's flags."""
        return None if seconds <= 0 else cls(clock() + seconds, clock)

    def passed(self) -> bool:
        return self.clock() >= self.at


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestOptions:
    """What a caller may add to any evaluation request."""

    context: Mapping[str, Any] = field(default_factory=dict)
    contextual_tuples: Sequence[TupleKey] = ()
    max_depth: int = DEFAULT_MAX_DEPTH
    #: List results at most; 0 for no bound (OpenFGA's StreamedListObjects).
    max_results: int = DEFAULT_MAX_RESULTS
    #: When a list evaluation answers with what it has (none: no deadline).
    deadline: Deadline | None = None
    #: A condition evaluation's cost at most (cel-go's count; 0: no limit).
    max_condition_cost: int = DEFAULT_MAX_CONDITION_COST
    #: Asked now and then during a condition evaluation: true ends it (the request's
    #: deadline passed, the caller went away).
    stop: Callable[[], bool] | None = None


class RequestContext:
    """One request: validated contextual tuples over the store, filtered reads."""

    def __init__(self, typesystem: TypeSystem, store: TupleReader, options: RequestOptions) -> None:
        self.ts = typesystem
        self.options = options
        self.context = options.context
        self.max_depth = options.max_depth
        self.deadline = options.deadline
        #: The store, under the contextual tuples (``reader`` reads both).
        self.store = store
        if options.contextual_tuples:
            typesystem.validate_contextual(list(options.contextual_tuples))
            self.reader: TupleReader = CombinedReader(
                MemoryTupleReader(options.contextual_tuples), store
            )
        else:
            self.reader = store

    def out_of_time(self) -> bool:
        return self.deadline is not None and self.deadline.passed()

    def valid(self, key: TupleKey) -> bool:
        return self.ts.tuple_problem(key) is None

    def condition_holds(self, key: TupleKey) -> bool:
        """Evaluate a tuple's condition; raises :class:`FgaError` 2000 when it cannot."""
        if not key.condition:
            return True
        try:
            return self.ts.condition(key.condition).evaluate(
                self.context,
                key.context,
                max_cost=self.options.max_condition_cost,
                stop=self.options.stop,
            )
        except ConditionError as exc:
            raise FgaError(ErrorCode.VALIDATION_ERROR, str(exc)) from exc

    def depth_exceeded(self) -> FgaError:
        return FgaError(
            ErrorCode.RESOLUTION_TOO_COMPLEX,
            "authorization model resolution too complex: depth exceeded",
        )
