"""The prune's one batch (bastion/storage/retention.py) on every database: rows below the
cut-off go, at most ``limit`` a call, the others stay."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from bastion.storage.retention import EXPIRING, LOGS, prune_batch
from bastion.storage.sql import Database
from bastion.storage.sql.schema import audit_logs, memory, verification_requests

#: far in the past: rows of other tests sharing the database are all newer, and stay
NOW = 100_000


def _audit_row(created_at: int, tag: str) -> dict[str, object]:
    return {"id": str(uuid.uuid4()), "action": f"prune.{tag}", "created_at": created_at}


async def test_logs_past_the_cut_off_go_in_batches(database: Database) -> None:
    tag = uuid.uuid4().hex[:8]
    old = [_audit_row(NOW - 10_000 - i, tag) for i in range(25)]
    new = [_audit_row(NOW + i, tag) for i in range(5)]
    await database.run(lambda c: c.execute(audit_logs.insert(), old + new), write=True)
    target = LOGS["audit_logs"]
    counts = []
    while True:
        count = await database.run(lambda c: prune_batch(c, target, NOW - 5_000, 10), write=True)
        counts.append(count)
        if count < 10:
            break
    assert counts == [10, 10, 5]
    mine = sa.select(audit_logs.c.created_at).where(audit_logs.c.action == f"prune.{tag}")
    left = await database.run(lambda c: c.execute(mine).scalars().all())
    assert sorted(left) == [row["created_at"] for row in new]


async def test_expired_requests_and_memory_rows_go_and_live_ones_stay(database: Database) -> None:
    tag = uuid.uuid4().hex[:8]
    requests = [
        {"id": str(uuid.uuid4()), "token": "t", "identifier": "basic_auth_signup",
         "expires_at": expires, "email": f"{tag}-{expires}@example.com", "nonce": "n",
         "created_at": 0, "updated_at": 0}
        for expires in (NOW - 1, NOW + 600)
    ]  # fmt: skip
    entries = [
        {"key": f"{tag}:{e}", "value": b"v", "expires_at": e} for e in (NOW - 1.0, NOW + 5.0)
    ]
    entries.append({"key": f"{tag}:forever", "value": b"v", "expires_at": None})

    def seed(conn: sa.Connection) -> None:
        conn.execute(verification_requests.insert(), requests)
        conn.execute(memory.insert(), entries)

    await database.run(seed, write=True)
    for target in EXPIRING:
        while await database.run(lambda c, t=target: prune_batch(c, t, NOW, 100), write=True):
            pass
    kept_requests = sa.select(verification_requests.c.expires_at).where(
        verification_requests.c.email.like(f"{tag}-%")
    )
    assert await database.run(lambda c: c.execute(kept_requests).scalars().all()) == [NOW + 600]
    kept = sa.select(memory.c.key).where(memory.c.key.like(f"{tag}:%"))
    assert sorted(await database.run(lambda c: c.execute(kept).scalars().all())) == [
        f"{tag}:{NOW + 5.0}",
        f"{tag}:forever",
    ]
