"""A cross-request cache of Check sub-problems, consulted by the :class:`Checker` on a
dispatch its request memo cannot answer.

Entries are keyed on a caller-given scope (the model id and the store's revision, say), so
a write that bumps the revision makes older entries unreachable; the least recently used
fall out past ``max_entries``. The entries are a plain dict in use order (a hit moves
its entry to the end by taking it out and putting it back): cheaper on a miss, the usual
case, than an ``OrderedDict``'s linked list. Only definitive outcomes are kept: no errors,
no results that met a cycle. Requests with a context or contextual tuples are
request-specific and bypass the cache (``scoped`` returns ``None`` for them). An
evaluation in rounds (:mod:`core.fga.on_demand`) passes its round's count of missing reads
as ``misses``: once a read of the round was missing, every outcome of the round may rest
on it (through the request's memo) and is speculative: none is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from itertools import islice

from bastion.core.fga.check import Checker, Step
from bastion.core.fga.check_plans import Plan
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.result import Outcome

__all__ = ["CacheStatistics", "CheckCache", "ScopedCache"]


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    entries: int
    hits: int
    misses: int


class CheckCache:
    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[Hashable, str, str, str], Outcome] = {}
        self.hits = 0
        self.misses = 0

    def evict(self) -> None:
        """Drop the least recently used sixteenth (at least one) of the entries.

        In one go: the dict keeps the holes of taken-out entries until it is next resized,
        and each eviction walks past those at its head, so one at a time costs a walk
        each; a sixteenth at a time, one walk per sixteenth of the inserts.
        """
        entries = self._entries
        for key in list(islice(entries, max(1, self.max_entries // 16))):
            del entries[key]

    def statistics(self) -> CacheStatistics:
        return CacheStatistics(len(self._entries), self.hits, self.misses)

    def scoped(
        self,
        scope: Hashable,
        options: RequestOptions,
        misses: Callable[[], int] | None = None,
    ) -> ScopedCache | None:
        """The cache as one request sees it, or ``None`` if the request must bypass it."""
        if options.context or options.contextual_tuples:
            return None
        return ScopedCache(self, scope, misses)


class ScopedCache:
    """One scope of a :class:`CheckCache` (a :class:`~core.fga.check.SubproblemCache`)."""

    __slots__ = ("cache", "entries", "misses", "scope")

    def __init__(
        self, cache: CheckCache, scope: Hashable, misses: Callable[[], int] | None = None
    ) -> None:
        self.cache = cache
        self.entries = cache._entries
        self.scope = scope
        self.misses = misses

    def resolve(self, checker: Checker, step: Step, plan: Plan | None) -> Outcome:
        key = (self.scope, step[0], step[1], checker.user)
        entries = self.entries
        outcome = entries.pop(key, None)
        if outcome is not None:
            entries[key] = outcome
            self.cache.hits += 1
            return outcome
        self.cache.misses += 1
        outcome = checker.evaluate(step, plan)
        misses = self.misses
        if outcome.error is None and not outcome.cycle and (misses is None or not misses()):
            # Not there before evaluating; a step being evaluated is never evaluated
            # again inside itself (its path answers CYCLE, which is not kept).
            entries[key] = outcome
            if len(entries) > self.cache.max_entries:
                self.cache.evict()
        return outcome
