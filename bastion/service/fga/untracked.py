"""The read cache's answers kept out of the cyclic collector's passes.

A full read cache holds millions of objects: each answer's ``TupleKey``\\ s, its tuple
and, for an object read whole, the index by relation and user
(:class:`~bastion.core.fga.on_demand.ObjectTuples`). CPython's cyclic collector walks
every tracked object in each full pass, and a pass starts whenever a quarter as many new
objects have survived: with a warm cache, a request that triggers one waits for all of
it (uniform cold checks at 9.8M tuples: p99.9 134-196 ms with the answers tracked,
37-46 ms untracked; bench/RESULTS.md).

No answer can be part of a reference cycle: it is a tree of tuples, dicts and
``TupleKey``\\ s whose leaves are text and a JSON context, and nothing in it refers back
to what holds it. So its containers are untracked here (``PyObject_GC_UnTrack``, the C
API's own call, through :mod:`ctypes`): the collector no longer walks them, and they
are still freed by their reference counts when the cache lets them go. An untracked
object's referents are taken as reachable, which is what they are. Where the C API is
not there (an interpreter other than CPython), nothing is done.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from bastion.core.fga.on_demand import Answer, ObjectTuples

__all__ = ["untrack_answer"]


def _untracker() -> Callable[[object], None] | None:
    api = getattr(ctypes, "pythonapi", None)
    untrack = getattr(api, "PyObject_GC_UnTrack", None)
    if untrack is None:
        return None
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    return untrack


_untrack = _untracker()


def untrack_answer(answer: Answer) -> None:
    """``answer``'s containers out of the collector's passes (see the module docstring)."""
    untrack = _untrack
    if untrack is None:
        return
    if isinstance(answer, ObjectTuples):
        by_relation = answer.by_relation
        for relation in by_relation.values():
            untrack(relation[0])
            untrack(relation[1])
            untrack(relation[2])
            untrack(relation)
        untrack(by_relation)
        untrack(answer.__dict__)
    elif not answer:
        return  # the empty tuple, never tracked: most of a cold ListObjects' answers
    for key in answer:
        untrack(key)
    untrack(answer)
