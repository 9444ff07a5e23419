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
cached state, then the reader method and its arguments), the least recently used out
first (by the clock algorithm), bounded by an estimate of their bytes, and shared by
every store of the process; the driver discards the keys a change touches
(:func:`keys_touched`) when it replays the store's changelog, and replaces the scope
when it cannot.

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
from typing import Generic, Literal, Protocol, TypeVar, cast

from bastion.core.fga.tuples import TupleKey, TupleReader, split_object

__all__ = [
    "MISSED",
    "OBJECT_LIMIT",
    "Answer",
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
#: object_type)`` or ``("read_object", object, limit)`` (the limit an int; a store's
#: :data:`~storage.fga.Read` has it as text) after a scope the driver chooses (its store's
#: cached state).
ReadKey = tuple[Hashable, ...]
Answer = tuple[TupleKey, ...]

#: Tuples of one object read whole (a server's ``object_limit``): a document's or a
#: group's handful, with room for a large team; past it, reads by relation and user.
OBJECT_LIMIT = 100

#: Estimated bytes of one cache entry besides its tuples and key text: its slots in the
#: dicts of answers and sizes, the key and answer tuples (measured with tracemalloc,
#: rounded up).
_ENTRY_BYTES = 240
#: Estimated bytes of one tuple of an answer besides its text: the TupleKey (slots), its
#: share of the answer tuple, and the strings' headers (not shared for the estimate).
_TUPLE_BYTES = 260
#: An object read whole also keeps its index (:class:`ObjectTuples`): the instance's
#: dict and the index's, each relation's two tuples and dict, and a tuple's share (its
#: slots in them), estimated the same way.
_INDEX_BYTES = 400
_RELATION_BYTES = 400
_INDEXED_TUPLE_BYTES = 112


def _entry_size(key: ReadKey, answer: Answer) -> int:
    size = _ENTRY_BYTES
    for part in key:
        if isinstance(part, str):
            size += len(part)
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
    """Read answers, least recently used first out (nearly), at most ``max_bytes``
    (estimated).

    Entries are a dict of answers in insertion order, their estimated bytes beside it, and
    a set of the keys *used* since the eviction's walk last passed them (the clock
    algorithm): a hit only adds its key there, and the eviction walks from the oldest,
    moves a used entry to the end with its mark taken and takes the others, down to
    fifteen sixteenths of the bound in one walk. A hit is then one lookup and one set
    insert, not a removal and an insertion. No object is made for an entry: the answers
    themselves are all the cache holds, which a driver may keep out of the cyclic
    collector's passes (``service/fga/untracked.py``). An answer larger than an eighth of
    the bound is not kept (one group of millions of members would push out everything
    else).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: dict[ReadKey, Answer] = {}
        self._sizes: dict[ReadKey, int] = {}
        self._used: set[ReadKey] = set()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: ReadKey) -> Answer | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._used.add(key)
        self.hits += 1
        return found

    def peek(self, key: ReadKey) -> Answer | None:
        """:meth:`get` without marking the entry used or counting: one read of the dict,
        safe from a worker thread while the owning thread uses the cache."""
        return self._entries.get(key)

    def put(self, key: ReadKey, answer: Answer) -> None:
        size = _entry_size(key, answer)
        entries, sizes = self._entries, self._sizes
        if entries.pop(key, None) is not None:
            self.bytes -= sizes.pop(key)
        if size > self.max_bytes // 8:
            self._used.discard(key)
            return
        entries[key] = answer
        sizes[key] = size
        self.bytes += size
        if self.bytes > self.max_bytes:
            self._evict()

    def discard(self, key: ReadKey) -> None:
        if self._entries.pop(key, None) is not None:
            self.bytes -= self._sizes.pop(key)
            self._used.discard(key)

    def _evict(self) -> None:
        target = self.max_bytes - self.max_bytes // 16
        entries, sizes, used = self._entries, self._sizes, self._used
        while self.bytes > target:
            victims: list[ReadKey] = []
            spared: list[ReadKey] = []
            freed = 0
            for key in entries:
                if self.bytes - freed <= target:
                    break
                if key in used:
                    used.discard(key)
                    spared.append(key)
                else:
                    victims.append(key)
                    freed += sizes[key]
            if not victims and not spared:
                break
            for key in victims:
                del entries[key]
                del sizes[key]
            for key in spared:  # a second chance, at the end of the walk's order
                entries[key] = entries.pop(key)
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
    return (scope, "read_object", obj, limit)


class ObjectReader(TupleReader, Protocol):
    """A store that can read an object's tuples whole (see the module docstring)."""

    def read_object(self, obj: str, limit: int) -> Sequence[TupleKey]:
        """Every tuple of ``obj`` if it has at most ``limit``; else ``limit + 1``."""
        ...


def answer_from(reader: TupleReader, key: ReadKey) -> Answer:
    """``key`` (scope first) asked of a synchronous reader."""
    method = cast(str, key[1])
    args = key[2:]
    if method == "read_object":
        obj, limit = cast(tuple[str, int], args)
        return ObjectTuples(cast(ObjectReader, reader).read_object(obj, limit))
    ask: Callable[..., Sequence[TupleKey]] = getattr(reader, method)
    return tuple(ask(*args))


#: One relation of an object read whole: its tuples, its userset tuples, each tuple by
#: its user (a key is unique: one tuple a user).
_Relation = tuple[Answer, Answer, dict[str, TupleKey]]


class ObjectTuples(tuple[TupleKey, ...]):
    """An object's tuples read whole (in their order), indexed by relation once, when
    made: every later read of the object, by any request, is a lookup
    (:class:`RoundReader`'s reads by object)."""

    by_relation: dict[str, _Relation]

    def __new__(cls, tuples: Sequence[TupleKey]) -> ObjectTuples:
        made = super().__new__(cls, tuples)
        lists: dict[str, tuple[list[TupleKey], list[TupleKey], dict[str, TupleKey]]] = {}
        for found in made:
            entry = lists.get(found.relation)
            if entry is None:
                entry = lists[found.relation] = ([], [], {})
            entry[0].append(found)
            if "#" in found.user:
                entry[1].append(found)
            entry[2][found.user] = found
        made.by_relation = {
            relation: (tuple(every), tuple(usersets), by_user)
            for relation, (every, usersets, by_user) in lists.items()
        }
        return made


def as_answer(key: ReadKey, tuples: Sequence[TupleKey]) -> Answer:
    """A fetched answer as kept: an object read whole is an :class:`ObjectTuples`."""
    if key[1] == "read_object":
        return tuples if isinstance(tuples, ObjectTuples) else ObjectTuples(tuples)
    return tuple(tuples)


#: An object read whole as a request knows it: its index by relation
#: (:attr:`ObjectTuples.by_relation`), or ``False`` when whole reads are off or it has
#: more tuples than the limit.
_Whole = dict[str, _Relation] | Literal[False]


class RoundReader:
    """One round's reader: the request's answers, then ``known`` (the shared cache); a
    read neither has is answered with nothing and noted in :attr:`missed`.

    ``objects`` (the request's objects read whole, shared by its rounds) is the first
    place a read by object looks: a warm read is one lookup there, then one in the
    object's index. The three reads by object repeat those first lines on purpose: a
    helper shared by them would be one more call on the engine's hottest path."""

    __slots__ = ("_answers", "_known", "_limit", "_objects", "_scope", "carried", "missed")

    def __init__(
        self,
        scope: Hashable,
        answers: dict[ReadKey, Answer],
        known: Callable[[ReadKey], Answer | None],
        object_limit: int | None = None,
        objects: dict[str, _Whole] | None = None,
        carried: dict[Hashable, object] | None = None,
    ) -> None:
        self._scope = scope
        self._answers = answers
        self._known = known
        self._limit = object_limit
        self._objects: dict[str, _Whole] = {} if objects is None else objects
        #: The reads this round could not answer, in the order it asked them.
        self.missed: dict[ReadKey, None] = {}
        #: What an evaluation keeps from one round of the request to the next, built from
        #: answered reads only (ListObjects' walk, :mod:`core.fga.reverse_walk`).
        self.carried: dict[Hashable, object] = {} if carried is None else carried

    def _get(self, key: ReadKey) -> Answer:
        return () if (found := self._lookup(key)) is None else found

    def _whole(self, obj: str) -> _Whole | None:
        """``obj``'s tuples read whole, not met by the request yet: from the shared cache
        (then kept for the request), else ``None``, noted as missed."""
        if self._limit is None:
            return False
        key = whole_object(self._scope, obj, self._limit)
        answer = self._known(key)
        if answer is None:
            self.missed[key] = None
            return None
        # Kept for the request: a later round answers it the same way whatever the
        # shared cache does meanwhile.
        found = self._objects[obj] = _as_whole(answer, self._limit)
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
            answers[key] = found  # kept for the request, as an object read whole
        return found

    def misses(self) -> int:
        """How many reads were missing so far (a check cache's guard)."""
        return len(self.missed)

    def read(self, obj: str, relation: str) -> Sequence[TupleKey]:
        whole = self._objects.get(obj)
        if whole is None:
            whole = self._whole(obj)
            if whole is None:
                return ()
        if whole is False:
            return self._get((self._scope, "read", obj, relation))
        found = whole.get(relation)
        return () if found is None else found[0]

    def read_exact(self, obj: str, relation: str, user: str) -> Sequence[TupleKey]:
        whole = self._objects.get(obj)
        if whole is None:
            whole = self._whole(obj)
            if whole is None:
                return ()
        if whole is False:
            return self._get((self._scope, "read_exact", obj, relation, user))
        found = whole.get(relation)
        if found is None:
            return ()
        # Not kept as one-tuples: a million cached tuples would be a million more
        # objects for the cyclic collector's full passes to walk.
        exact = found[2].get(user)
        return () if exact is None else (exact,)

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        whole = self._objects.get(obj)
        if whole is None:
            whole = self._whole(obj)
            if whole is None:
                return ()
        if whole is False:
            return self._get((self._scope, "read_usersets", obj, relation))
        found = whole.get(relation)
        return () if found is None else found[1]

    def read_by_user(self, user: str, object_type: str) -> Sequence[TupleKey]:
        """As the store; a read that missed answers :data:`MISSED` (no tuples)."""
        found = self._lookup((self._scope, "read_by_user", user, object_type))
        return MISSED if found is None else found

    def missed_by_user(self, user: str, object_type: str) -> bool:
        """Whether this round's :meth:`read_by_user` of these missed (through a reader
        that combines its answer with others, where :data:`MISSED` is not seen)."""
        return (self._scope, "read_by_user", user, object_type) in self.missed


class _Missed(tuple[TupleKey, ...]):
    """The type of :data:`MISSED`."""


#: What a :class:`RoundReader`'s :meth:`~RoundReader.read_by_user` answers for a read it
#: could not answer: no tuples, told apart from an answer of none by identity.
MISSED: Sequence[TupleKey] = _Missed()


def _as_whole(answer: Answer, limit: int) -> _Whole:
    return cast(ObjectTuples, answer).by_relation if len(answer) <= limit else False


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
        #: Objects read whole, as the request's rounds have met them.
        self._objects: dict[str, _Whole] = {}
        self._carried: dict[Hashable, object] = {}
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
        reader = RoundReader(
            self._scope,
            self._answers,
            self._known,
            self._object_limit,
            self._objects,
            self._carried,
        )
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
        answer = as_answer(key, tuples)
        if key[1] == "read_object":
            self._objects[cast(str, key[2])] = _as_whole(answer, cast(int, key[3]))
        else:
            self._answers[key] = answer

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
