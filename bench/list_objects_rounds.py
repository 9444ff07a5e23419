"""ListObjects in rounds (a store read on demand) over folder trees of several shapes.

Over a store read on demand, an evaluation runs in rounds: each round's missed reads are
fetched before the next (``core.fga.on_demand``). A walk started again each round costs
the sum of its depths; one carried from round to round (``core.fga.reverse_walk``) costs
its last. This times the engine alone, the store in memory (``evaluate_from``: the same
rounds and the same read cache as a server, with no I/O): a chain of ``--depth`` folders
with ``--documents`` in each, and a tree of eight children a folder, ``--levels`` deep,
a document in each folder, the user a viewer of the root.

Run: ``.venv/bin/python bench/list_objects_rounds.py [--depth 20] [--documents 500]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bastion.core.fga import RequestOptions, list_objects
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.on_demand import OBJECT_LIMIT, ReadCache, evaluate_from
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem

MODEL = """model
  schema 1.1
type user
type folder
  relations
    define parent: [folder]
    define viewer: [user] or viewer from parent
type doc
  relations
    define parent: [folder]
    define viewer: [user] or viewer from parent
"""


def chain(depth: int, documents: int) -> list[TupleKey]:
    tuples = [TupleKey("folder:f0", "viewer", "user:anne")]
    tuples += [TupleKey(f"folder:f{n}", "parent", f"folder:f{n - 1}") for n in range(1, depth)]
    tuples += [
        TupleKey(f"doc:{n}_{d}", "parent", f"folder:f{n}")
        for n in range(depth)
        for d in range(documents)
    ]
    return tuples


def tree(levels: int) -> list[TupleKey]:
    tuples = [TupleKey("folder:f0", "viewer", "user:anne")]
    count = sum(8**level for level in range(levels))
    tuples += [
        TupleKey(f"folder:f{n}", "parent", f"folder:f{(n - 1) // 8}") for n in range(1, count)
    ]
    tuples += [TupleKey(f"doc:{n}", "parent", f"folder:f{n}") for n in range(count)]
    return tuples


def timed(ts: TypeSystem, tuples: list[TupleKey], runs: int) -> tuple[float, int, int]:
    """Median ms of ``runs`` cold ListObjects (a new read cache each), the reads it
    cached, the objects it listed."""
    store = MemoryTupleReader(tuples)
    options = RequestOptions(max_results=0)
    samples, found, reads = [], 0, 0
    for _ in range(runs):
        cache = ReadCache(1 << 30)
        start = time.perf_counter()
        result = evaluate_from(
            lambda r: list_objects(ts, r, "doc", "viewer", "user:anne", options),
            store,
            cache,
            "s",
            OBJECT_LIMIT,
        )
        samples.append((time.perf_counter() - start) * 1000)
        found = len(result.items)
        reads = cache.statistics().entries
    return statistics.median(samples), reads, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--documents", type=int, default=500)
    parser.add_argument("--levels", type=int, default=6)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ts = TypeSystem(parse_model(MODEL))
    print("| shape | objects listed | reads cached | cold ListObjects, median |")
    print("|---|---|---|---|")
    for label, tuples in (
        (
            f"chain of {args.depth} folders, {args.documents} documents each",
            chain(args.depth, args.documents),
        ),
        (f"tree of {args.levels} levels, 8 children a folder", tree(args.levels)),
    ):
        ms, reads, found = timed(ts, tuples, args.runs)
        print(f"| {label} | {found:,} | {reads:,} | {ms:.0f} ms |")


if __name__ == "__main__":
    main()
