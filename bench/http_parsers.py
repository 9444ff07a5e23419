"""How much of a request's CPU is h11's: the fast path's ceiling (two bare trio processes
on one port, ``bench/raw_h11.py``) with h11 and with llhttp's C parser (``httptools``),
alternately, in one run, with and without one Redis read a request.

The difference in server CPU per request is about what bastion's own server would save
by parsing with httptools, which it now does (measured before the change: bastion's
server did more with h11 than the bare loop does). Run:
``.venv/bin/python bench/http_parsers.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fast_path import ceiling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    print("| round | loop | req/s | server CPU ms/req | p99 ms |")
    print("|---|---|---|---|---|")
    for round_ in range(1, args.rounds + 1):
        for redis in ((), ("--redis", "127.0.0.1:6379")):
            for name in ("h11", "httptools"):
                got = ceiling(args.seconds, "--parser", name, *redis)
                label = name + (" + one Redis GET" if redis else "")
                print(
                    f"| {round_} | {label} | {got['rps']:,.0f} | {got['cpu_ms']:.3f} | "
                    f"{got['p99_ms']:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
