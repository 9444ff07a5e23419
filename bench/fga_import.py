"""``bastion fga import`` and ``export`` at scale: tuples/s into (and out of) PostgreSQL.

A generated organisation of about ``--tuples`` tuples in ``bench/fga.py``'s shape (users,
nested groups, a folder tree, documents with a parent folder, an owner and a viewer or an
editor group) is written to a CSV file as it is generated (never all in memory), then:

1. ``bastion fga import`` (the real command, a process of its own) into a fresh database
   holding the model: the import's wall time and tuples/s, and the database's size after;
2. the same file again: every tuple already there (the duplicate-skipping pass);
3. ``bastion fga export`` of the store to CSV: tuples/s.

``--database-url`` names an existing PostgreSQL server's database to use instead of a
fresh one on the test server (its tables are emptied first); with ``--postmaster-pid``
(that server's, when nothing else uses it) the server's CPU time is printed too. Beside
each wall time: the command's own CPU time, so that figures taken on a loaded machine
can be read as costs. Run:
``.venv/bin/python bench/fga_import.py [--tuples 1000000] [--database-url URL]``.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.fga_files import CSV_COLUMNS  # noqa: E402
from bastion.storage import StorageConfig, open_storage  # noqa: E402
from bastion.storage.fga import SqlFgaStore, StoredModel  # noqa: E402
from bench.fga import MODEL  # noqa: E402
from tests.dbfixtures import drop_made_databases, fresh_postgres_url  # noqa: E402
from tests.server.harness import BASTION  # noqa: E402


def organisation(tuples: int, seed: int) -> Iterator[tuple[str, str, str]]:
    """(user, relation, object) triples, about ``tuples`` of them, each once."""
    rng = random.Random(seed)
    documents = max(1, tuples // 3)
    users = max(1000, documents // 6)
    groups = max(50, documents // 150)
    folders = max(100, documents // 15)
    for g in range(groups):
        for u in rng.sample(range(users), 25):
            yield f"user:u{u}", "member", f"group:g{g}"
        if g and rng.random() < 0.5:
            yield f"group:g{rng.randrange(g)}#member", "member", f"group:g{g}"
    for f in range(1, folders):
        yield f"folder:f{(f - 1) // 8}", "parent", f"folder:f{f}"
    for f in range(folders):
        if rng.random() < 0.5:
            yield f"group:g{rng.randrange(groups)}#member", "viewer", f"folder:f{f}"
    for d in range(documents):
        yield f"folder:f{rng.randrange(folders)}", "parent", f"document:d{d}"
        yield f"user:u{rng.randrange(users)}", "owner", f"document:d{d}"
        if rng.random() < 0.7:
            yield f"user:u{rng.randrange(users)}", "viewer", f"document:d{d}"
        else:
            yield f"group:g{rng.randrange(groups)}#member", "editor", f"document:d{d}"


def write_csv(path: Path, tuples: int, seed: int) -> int:
    count = 0
    with path.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS[:6])
        for user, relation, obj in organisation(tuples, seed):
            user_object, _, user_relation = user.partition("#")
            user_type, _, user_id = user_object.partition(":")
            object_type, _, object_id = obj.partition(":")
            writer.writerow([user_type, user_id, user_relation, relation, object_type, object_id])
            count += 1
    return count


async def prepare(url: str) -> None:
    config = StorageConfig(database_type="postgres", database_url=url, timeout=600)
    async with open_storage(config) as storage:
        await storage.db.run(_empty, write=True)
        await SqlFgaStore(storage.db).write_model(StoredModel("01BENCHMODEL0000000000000", MODEL))


def _empty(conn: sa.Connection) -> None:
    for table in ("service_fga_tuples", "service_fga_changelog", "service_fga_models"):
        conn.exec_driver_sql(f"TRUNCATE {table}")


def database_size(url: str) -> str:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        size = conn.exec_driver_sql(
            "SELECT pg_size_pretty(sum(pg_total_relation_size(relid))), "
            "pg_size_pretty(pg_total_relation_size('service_fga_changelog')) "
            "FROM pg_partition_tree('service_fga_tuples')"
        ).one()
    engine.dispose()
    return f"tuples table {size[0]}, changelog {size[1]}"


def server_cpu(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster with its reaped children, and
    its live children."""
    tick = os.sysconf("SC_CLK_TCK")

    def fields(pid: int) -> list[str]:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    own = fields(postmaster)
    total = sum(int(x) for x in own[11:15])
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                child = fields(int(entry.name))
            except OSError:
                continue
            if int(child[1]) == postmaster:
                total += int(child[11]) + int(child[12])
    return total / tick


def timed(postmaster: int, *args: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server = server_cpu(postmaster) if postmaster else 0.0
    start = time.monotonic()
    done = subprocess.run([BASTION, "fga", *args], capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(done.stderr)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print("   ", (done.stdout or done.stderr).strip().splitlines()[-1])
    note = f"    command CPU {cpu:.1f} s"
    if postmaster:
        note += f", PostgreSQL CPU {server_cpu(postmaster) - server:.1f} s"
    print(note)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--postmaster-pid", type=int, default=0)
    args = parser.parse_args()
    url = args.database_url or fresh_postgres_url("import")
    trio.run(prepare, url)
    flags = ["--database-type=postgres", f"--database-url={url}"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tuples.csv"
        start = time.monotonic()
        count = write_csv(path, args.tuples, args.seed)
        print(f"generated {count:,} tuples ({path.stat().st_size / 2**20:,.0f} MiB of CSV) "
              f"in {time.monotonic() - start:.0f} s")  # fmt: skip
        first = timed(args.postmaster_pid, "import", *flags, str(path))
        print(f"import: {first:.1f} s, {count / first:,.0f} tuples/s; {database_size(url)}")
        again = timed(args.postmaster_pid, "import", *flags, str(path))
        print(f"import again (all there): {again:.1f} s, {count / again:,.0f} tuples/s")
        out = Path(tmp) / "export.csv"
        exported = timed(args.postmaster_pid, "export", *flags, str(out))
        print(f"export: {exported:.1f} s, {count / exported:,.0f} tuples/s")


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
