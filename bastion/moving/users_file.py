"""``bastion import users FILE`` and ``bastion export users [FILE]``: users as JSON lines
(one :mod:`record <bastion.moving.records>` a line), password hashes included.

An import reads the file once; a line that is not a usable record is reported with its line
number and skipped, the others go in by batches (:mod:`bastion.moving.writer`).
"""

from __future__ import annotations

import json
from functools import partial
from typing import IO

from bastion.moving.records import ImportedUser, RecordProblem, RecordRules, record_of, user_of
from bastion.moving.writer import SKIPPED, ImportRun
from bastion.progress import Progress
from bastion.storage import users as user_rows
from bastion.storage.sql.database import Database

__all__ = ["export_users", "import_users"]

BATCH = 500
_KIND = "users"


async def import_users(run: ImportRun, lines: IO[str], *, rules: RecordRules) -> None:
    batch: list[tuple[str, ImportedUser]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            imported = user_of(json.loads(line), rules)
        except json.JSONDecodeError as exc:
            run.tally.add(_KIND, SKIPPED, where, f"not JSON ({exc.msg})")
            continue
        except RecordProblem as exc:
            run.tally.add(_KIND, SKIPPED, where, str(exc))
            continue
        batch.append((where, imported))
        if len(batch) >= BATCH:
            await run.users(batch)
            batch = []
    await run.users(batch)


async def export_users(db: Database, out: IO[str], *, progress: Progress) -> int:
    """Every user, in id order; the number written."""
    written, after = 0, ""
    while True:
        page = await db.read(partial(user_rows.page_after, after_id=after, limit=BATCH))
        if not page:
            return written
        for user in page:
            out.write(json.dumps(record_of(user), separators=(",", ":"), ensure_ascii=False))
            out.write("\n")
        written += len(page)
        progress(written, _KIND)
        after = page[-1].id
