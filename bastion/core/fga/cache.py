"""A cross-request cache of Check sub-problems, as a wrapper around a :class:`Resolver`.

Entries are keyed on a caller-given scope (the model id and the store's revision, say), so
a write that bumps the revision makes older entries unreachable; the least recently used
fall out past ``max_entries``. Only definitive outcomes are kept: no errors, no results
that met a cycle. Requests with a context or contextual tuples are request-specific and
bypass the cache (``wrapper`` returns ``None`` for them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from bastion.core.fga.check import Resolver, ResolverWrapper, Step
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.result import Outcome

__all__ = ["CacheStatistics", "CachingResolver", "CheckCache"]


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    entries: int
    hits: int
    misses: int


class CheckCache:
    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[Hashable, str, str, str], Outcome] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def statistics(self) -> CacheStatistics:
        return CacheStatistics(len(self._entries), self.hits, self.misses)

    def get(self, key: tuple[Hashable, str, str, str]) -> Outcome | None:
        outcome = self._entries.get(key)
        if outcome is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return outcome

    def put(self, key: tuple[Hashable, str, str, str], outcome: Outcome) -> None:
        entries = self._entries
        if key in entries:
            entries.move_to_end(key)
        entries[key] = outcome
        if len(entries) > self.max_entries:
            entries.popitem(last=False)

    def wrapper(self, scope: Hashable, options: RequestOptions) -> ResolverWrapper | None:
        """A resolver wrapper for one request, or ``None`` if the request must bypass."""
        if options.context or options.contextual_tuples:
            return None
        return lambda delegate: CachingResolver(delegate, self, scope)


class CachingResolver:
    """Answers from the cache, else asks its delegate and keeps definitive answers."""

    def __init__(self, delegate: Resolver, cache: CheckCache, scope: Hashable) -> None:
        self.delegate = delegate
        self.cache = cache
        self.scope = scope

    def resolve(
        self, obj: str, relation: str, user: str, depth: int, visited: set[Step]
    ) -> Outcome:
        key = (self.scope, obj, relation, user)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        outcome = self.delegate.resolve(obj, relation, user, depth, visited)
        if outcome.error is None and not outcome.cycle:
            self.cache.put(key, outcome)
        return outcome
