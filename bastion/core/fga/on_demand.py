"""Evaluation over a store read on demand: rounds of batched reads and a bounded cache.

The evaluator reads tuples through a synchronous :class:`~core.fga.tuples.TupleReader`.
A store that lives elsewhere (SQL) cannot answer one read at a time without a round trip
each, so :class:`Speculation` runs the evaluation in *rounds*: a round answers every read
it can (the request's answers so far, then a process-wide :class:`ReadCache`) and
answers a read it cannot as if the store held nothing there, noting it. When a round
noted nothing, its result is the answer; otherwise its result is dropped, the driver
fetches every noted read at once (one batch of queries) and runs the next round::

    speculation = Speculation(lambda reader: check(ts, reader, obj, relation, user), known)
    while reads := speculation.step():
        for read, tuples in zip(reads, await store.fetch(reads)):
            speculation.answer(read, tuples)
    allowed = speculation.result

A round that meets an empty answer explores less (a union's other branches still run),
so the rounds needed are the depth of the chain of reads that depend on one another
(a document, its folder, the folder's parent, a group, its parent group...), not the
number of reads: the reads of one depth are asked together. Each round answers more of
the reads, so the rounds end. A round's speculative result may be wrong (an exclusion
whose subtracted side was not read yet allows too much), which is why it is never used,
and why a sub-problem's outcome is kept beyond the request (the check cache) only in a round
where no read was missing so far (:meth:`RoundReader.misses`).

:class:`ReadCache` keeps answers by their :data:`ReadKey` (a scope naming the store's
cached state, then the reader method and its arguments) in least-recently-used order,
bounded by an estimate of their bytes, and shared by every store of the process; the
driver discards the keys a change touches (:func:`keys_touched`) when it replays the
store's changelog, and replaces the scope when it cannot.

Whole objects (``object_limit``): a check asks several reads of one object (the exact
tuple for its user, then the usersets, of each relation it walks), and the exact read
differs for every user. With a limit, a read by object is answered from the object's
whole tuple set, read once (``("read_object", object, limit)``: at most ``limit + 1``
tuples) and cached as one entry: a document, a folder or a group read for one user
answers every later user's check, and a cold check asks one read per object. An object
with more tuples than the limit (a group of a million members) is read as before, one
question at a time; its overflowing answer stays cached to say so.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from bastion.core.fga.tuples import TupleKey, TupleReader, split_object

__all__ = [
    "OBJECT_LIMIT",
    "ObjectReader",
    "ObjectTuples",
    "ReadCache",
    "ReadKey",
    "RoundReader",
    "Speculation",
    "answer_from",
    "as_answer",
    "evaluate_from",
    "keys_touched",
    "whole_object",
]

T = TypeVar("T")

#: ``(scope, method, *arguments)``: ``("read", object, relation)``, ``("read_exact", object,
#: relation, user)``, ``("read_usersets", object, relation)``, ``("read_by_user", user,
#: object_type)`` or ``("read_object", object, limit)`` (the limit as text) after a scope the
#: driver chooses (its store's cached state).
ReadKey = tuple[Hashable, ...]
Answer = tuple[TupleKey, ...]

#: Tuples of one object read whole (a server's ``object_limit``): a document's or a
#: group's handful, with room for a large team; past it, reads by relation and user.
OBJECT_LIMIT = 100

#: Estimated bytes of one cache entry besides its tuples and key text: the dict slot, the
#: key and answer tuples, the entry's own tuple (measured with tracemalloc, rounded up).
_ENTRY_BYTES = 240
#: Estimated bytes of one tuple of an answer besides its text: the TupleKey (slots), its
#: share of the answer tuple, and the strings' headers (not shared for the estimate).
_TUPLE_BYTES = 260
#: An object read whole also keeps its index (:class:`ObjectTuples`): the instance's
#: dict and the index's, each relation's two tuples and dict, and a tuple's share (its
#: slot in them and its own one-tuple), estimated the same way.
_INDEX_BYTES = 400
_RELATION_BYTES = 400
_INDEXED_TUPLE_BYTES = 160


def _entry_size(key: ReadKey, answer: Answer) -> int:
    size = _ENTRY_BYTES + sum(len(part) for part in key if isinstance(part, str))
    if isinstance(answer, ObjectTuples):
        size += _INDEX_BYTES + len(answer.by_relation) * _RELATION_BYTES
        size += len(answer) * _INDEXED_TUPLE_BYTES
    for found in answer:
        size += _TUPLE_BYTES + len(found.object) + len(found.relation) + len(found.user)
        if found.context:
            size += 64 * len(found.context) + len(found.condition)
    return size


@dataclass(frozen=True, slots=True)
class CacheStatistics:
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class ReadCache:
    """Read answers, least recently used first out, at most ``max_bytes`` (estimated).

    Entries are a dict in use order (a hit takes its entry out and puts it back), as in
    :class:`~core.fga.cache.CheckCache`; past the bound the oldest go, down to fifteen
    sixteenths of it in one walk. An answer larger than an eighth of the bound is not
    kept (one group of millions of members would push out everything else).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: dict[ReadKey, tuple[Answer, int]] = {}
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: ReadKey) -> Answer | None:
        entries = self._entries
        found = entries.pop(key, None)
        if found is None:
            self.misses += 1
            return None
        entries[key] = found
        self.hits += 1
        return found[0]

    def peek(self, key: ReadKey) -> Answer | None:
        """:meth:`get` without touching the use order or the counts: one read of the
        dict, safe from a worker thread while the owning thread uses the cache."""
        found = self._entries.get(key)
        return None if found is None else found[0]

    def put(self, key: ReadKey, answer: Answer) -> None:
        size = _entry_size(key, answer)
        self.discard(key)
        if size > self.max_bytes // 8:
            return
        self._entries[key] = (answer, size)
        self.bytes += size
        if self.bytes > self.max_bytes:
            self._evict()

    def discard(self, key: ReadKey) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.bytes -= found[1]

    def _evict(self) -> None:
        target = self.max_bytes - self.max_bytes // 16
        victims: list[ReadKey] = []
        freed = 0
        for key, (_, size) in self._entries.items():
            if self.bytes - freed <= target:
                break
            victims.append(key)
            freed += size
        for key in victims:
            del self._entries[key]
        self.bytes -= freed
        self.evictions += len(victims)

    def statistics(self) -> CacheStatistics:
        return CacheStatistics(
            len(self._entries),
            self.bytes,
            self.max_bytes,
            self.hits,
            self.misses,
            self.evictions,
        )


def keys_touched(
    scope: Hashable, key: TupleKey, object_limit: int | None = None
) -> tuple[ReadKey, ...]:
    """Every read whose answer a write or a delete of ``key`` changes (``object_limit``:
    the whole-object reads' limit, if they are used)."""
    object_type = split_object(key.object)[0]
    touched: tuple[ReadKey, ...] = (
        (scope, "read", key.object, key.relation),
        (scope, "read_exact", key.object, key.relation, key.user),
        (scope, "read_by_user", key.user, object_type),
    )
    if "#" in key.user:
        touched += ((scope, "read_usersets", key.object, key.relation),)
    if object_limit is not None:
        touched += (whole_object(scope, key.object, object_limit),)
    return touched


def whole_object(scope: Hashable, obj: str, limit: int) -> ReadKey:
    """The read of ``obj``'s tuples whole (see the module docstring)."""
    return (scope, "read_object", obj, str(limit))


class ObjectReader(TupleReader, Protocol):
    """A store that can read an object's tuples whole (see the module docstring)."""

    def read_object(self, obj: str, limit: int) -> Sequence[TupleKey]:
        """Every tuple of ``obj`` if it has at most ``limit``; else ``limit + 1``."""
        ...


def answer_from(reader: TupleReader, key: ReadKey) -> Answer:
    """``key`` (scope first) asked of a synchronous reader."""
    method = cast(str, key[1])
    args = cast(tuple[str, ...], key[2:])
    if method == "read_object":
        return ObjectTuples(cast(ObjectReader, reader).read_object(args[0], int(args[1])))
    ask: Callable[..., Sequence[TupleKey]] = getattr(reader, method)
    return tuple(ask(*args))


#: One relation of an object read whole: its tuples, its userset tuples, by user.
_Relation = tuple[Answer, Answer, dict[str, Answer]]


class ObjectTuples(tuple[TupleKey, ...]):
    """An object's tuples read whole (in their order), indexed by relation once, when
    made: every later read of the object, by any request, is a lookup."""

    by_relation: dict[str, _Relation]

    def __new__(cls, tuples: Sequence[TupleKey]) -> ObjectTuples:
        made = super().__new__(cls, tuples)
        lists: dict[str, tuple[list[TupleKey], list[TupleKey], dict[str, Answer]]] = {}
        for found in made:
            entry = lists.get(found.relation)
            if entry is None:
                entry = lists[found.relation] = ([], [], {})
            entry[0].append(found)
            if "#" in found.user:
                entry[1].append(found)
            entry[2][found.user] = (found,)
        made.by_relation = {
            relation: (tuple(every), tuple(usersets), by_user)
            for relation, (every, usersets, by_user) in lists.items()
        }
        return made

    def read(self, relation: str) -> Answer:
        found = self.by_relation.get(relation)
        return () if found is None else found[0]

    def read_exact(self, relation: str, user: str) -> Answer:
        found = self.by_relation.get(relation)
        return () if found is None else found[2].get(user, ())

    def read_usersets(self, relation: str) -> Answer:
        found = self.by_relation.get(relation)
        return () if found is None else found[1]


def as_answer(key: ReadKey, tuples: Sequence[TupleKey]) -> Answer:
    """A fetched answer as kept: an object read whole is an :class:`ObjectTuples`."""
    if key[1] == "read_object":
        return tuples if isinstance(tuples, ObjectTuples) else ObjectTuples(tuples)
    return tuple(tuples)


class RoundReader:
    """One round's reader: the request's answers, then ``known`` (the shared cache); a
    read neither has is answered with nothing and noted in :attr:`missed`."""

    __slots__ = ("_answers", "_known", "_limit", "_scope", "_wholes", "missed")

    def __init__(
        self,
        scope: Hashable,
        answers: dict[ReadKey, Answer],
        known: Callable[[ReadKey], Answer | None],
        object_limit: int | None = None,
    ) -> None:
        self._scope = scope
        self._answers = answers
        self._known = known
        self._limit = object_limit
        #: Objects read whole, met this round (``False``: over the limit).
        self._wholes: dict[str, ObjectTuples | bool] = {}
        #: The reads this round could not answer, in the order it asked them.
        self.missed: dict[ReadKey, None] = {}

    def _get(self, key: ReadKey) -> Answer:
        return () if (found := self._lookup(key)) is None else found

    def _whole(self, obj: str) -> ObjectTuples | bool | None:
        """``obj``'s tuples read whole; ``None`` if not known yet (noted as missed);
        ``False`` if whole reads are off or it has more than the limit."""
        wholes = self._wholes
        found = wholes.get(obj)
        if found is None:
            if self._limit is None:
                return False
            answer = self._lookup(whole_object(self._scope, obj, self._limit))
            if answer is None:
                return None
            found = wholes[obj] = (
                cast(ObjectTuples, answer) if len(answer) <= self._limit else False
            )
        return found

    def _lookup(self, key: ReadKey) -> Answer | None:
        """``key``'s answer from the request's answers or the shared cache; ``None``,
        noted as missed, if neither has it."""
        answers = self._answers
        found = answers.get(key)
        if found is None:
            found = self._known(key)
            if found is None:
                self.missed[key] = None
                return None
            # Kept for the request: a later round answers it the same way whatever the
            # shared cache does meanwhile.
            answers[key] = found
        return found

    def misses(self) -> int:
        """How many reads were missing so far (a check cache's guard)."""
        return len(self.missed)

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        whole = self._whole(obj)
        if isinstance(whole, ObjectTuples):
            return whole.read(relation)
        return () if whole is None else self._get((self._scope, "read", obj, relation))

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        whole = self._whole(obj)
        if isinstance(whole, ObjectTuples):
            return whole.read_exact(relation, user)
        if whole is None:
            return ()
        return self._get((self._scope, "read_exact", obj, relation, user))

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        whole = self._whole(obj)
        if isinstance(whole, ObjectTuples):
            return whole.read_usersets(relation)
        return () if whole is None else self._get((self._scope, "read_usersets", obj, relation))

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        return self._get((self._scope, "read_by_user", user, object_type))


_NOT_YET = object()


class Speculation(Generic[T]):
    """``run(reader)`` evaluated in rounds; see the module docstring.

    ``run`` receives a :class:`RoundReader` (which it may hand to a check cache's guard).
    """

    def __init__(
        self,
        run: Callable[[RoundReader], T],
        known: Callable[[ReadKey], Answer | None],
        scope: Hashable = None,
        object_limit: int | None = None,
    ) -> None:
        self._run = run
        self._known = known
        self._scope = scope
        self._object_limit = object_limit
        self._answers: dict[ReadKey, Answer] = {}
        self._result: object = _NOT_YET
        self._error: Exception | None = None
        #: Rounds run so far.
        self.rounds = 0

    def step(self) -> list[ReadKey]:
        """Run a round; the reads it missed (to :meth:`answer` before the next step), or
        ``[]`` once :attr:`result` is known."""
        if self._result is not _NOT_YET:
            return []
        self.rounds += 1
        reader = RoundReader(self._scope, self._answers, self._known, self._object_limit)
        try:
            result = self._run(reader)
        except Exception as exc:
            if reader.missed:
                return list(reader.missed)
            self._result, self._error = None, exc
            return []
        if reader.missed:
            return list(reader.missed)
        self._result = result
        return []

    def answer(self, key: ReadKey, tuples: Sequence[TupleKey]) -> None:
        self._answers[key] = as_answer(key, tuples)

    @property
    def result(self) -> T:
        """The evaluation's result; its error (an ``FgaError``, say) raised here."""
        if self._result is _NOT_YET:
            raise RuntimeError("the evaluation still needs reads: call step() until []")
        if self._error is not None:
            raise self._error
        return cast(T, self._result)


def evaluate_from(
    run: Callable[[RoundReader], T],
    store: TupleReader,
    cache: ReadCache | None = None,
    scope: Hashable = None,
    object_limit: int | None = None,
) -> T:
    """``run`` driven in rounds against a synchronous ``store`` (each round's reads asked
    of it together), through ``cache`` if given: the on-demand path without the I/O, for
    the engine's suites and tools. ``object_limit``: read objects whole (``store`` must
    then be an :class:`ObjectReader`)."""
    known = (lambda key: None) if cache is None else cache.get
    speculation = Speculation(run, known, scope, object_limit)
    while reads := speculation.step():
        for key in reads:
            answer = as_answer(key, answer_from(store, key))
            speculation.answer(key, answer)
            if cache is not None:
                cache.put(key, answer)
    return speculation.result
