"""What a check of a conditioned tuple costs, to see what the cost budget's accounting adds
(bench/RESULTS.md, "Condition cost budget").

One check (``core.fga.check.check``) of a tuple whose condition is one of
``bench/cel_engines.py``'s three typical OpenFGA conditions, the request context as JSON:
CPU microseconds per check, the best of ``--rounds`` rounds of ``--calls`` checks. The
checkout measured is the one on ``PYTHONPATH``, so one copy of this file times both sides
of a change, run alternately::

    PYTHONPATH=/path/to/main python bench/condition_cost.py
    PYTHONPATH=. python bench/condition_cost.py
"""

from __future__ import annotations

import argparse
import time

from bastion.core.fga.check import check
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem
from bench.cel_engines import CONDITIONS


def model(name: str, parameters: dict[str, str], expression: str) -> str:
    declared = ", ".join(f"{p}: {t}" for p, t in parameters.items())
    return (
        "model\n  schema 1.1\ntype user\ntype doc\n  relations\n"
        f"    define viewer: [user with c]\ncondition c({declared}) {{\n  {expression}\n}}\n"
    )


def per_check_us(name: str, rounds: int, calls: int) -> float:
    expression, parameters, context = CONDITIONS[name]
    ts = TypeSystem(parse_model(model(name, parameters, expression)))
    store = MemoryTupleReader([TupleKey("doc:1", "viewer", "user:anne", "c")])
    options = RequestOptions(context=context)
    assert check(ts, store, "doc:1", "viewer", "user:anne", options) is True
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(calls):
            check(ts, store, "doc:1", "viewer", "user:anne", options)
        best = min(best, (time.process_time() - started) / calls * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    print(" | ".join(f"{n}: {per_check_us(n, args.rounds, args.calls):.1f} us" for n in CONDITIONS))


if __name__ == "__main__":
    main()
