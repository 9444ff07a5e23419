"""The long schemathesis run of the robustness issue: every route /openapi.json documents,
on PostgreSQL + Redis, as the admin and from the server's own origin, with many more
examples per operation than the suite's seeded pass (tests/server/test_schemathesis.py).
Any server error fails it; schemathesis prints how many cases it ran.

Run: ``.venv/bin/python bench/fuzz.py [--examples 60] [--seed 27]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import base_flags, running  # noqa: E402
from tests.server.test_schemathesis import schemathesis_command  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=60, help="per operation")
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    flags = [
        *base_flags("postgres", fresh_postgres_url("fuzz")),
        f"--memory-store-url={fresh_redis_url()}",
    ]
    with tempfile.TemporaryDirectory() as tmp, running(flags, Path(tmp)) as server:
        started = time.monotonic()
        run = subprocess.run(
            schemathesis_command(server.url, args.examples, args.seed),
            cwd=tmp,
            check=False,
        )
        took = time.monotonic() - started
    print(f"schemathesis exit {run.returncode} after {took:.0f} s; {os.cpu_count()} cores")
    sys.exit(run.returncode)


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
