"""The background prune in a running server (``--prune-interval``,
``--audit-log-retention-days``): an audit row past retention and an expired verification
request go, recent audit rows stay; ``bastion_pruned_rows_total`` counts them."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path

import httpx

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import base_flags, running
from tests.server.test_workers import wait_for

DAY = 86_400


def pruned(metrics: str, table: str) -> float:
    prefix = f'bastion_pruned_rows_total{{table="{table}"}} '
    return sum(
        float(line[len(prefix) :]) for line in metrics.splitlines() if line.startswith(prefix)
    )


def test_the_server_prunes_old_audit_rows_and_expired_requests(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path, "retention")
    flags = [*base_flags("sqlite", database), "--prune-interval=1", "--audit-log-retention-days=2"]
    with running(flags, tmp_path, name="retention") as server:
        now = int(time.time())
        old, recent = str(uuid.uuid4()), str(uuid.uuid4())
        with sqlite3.connect(database) as conn:
            conn.executemany(
                "insert into service_audit_logs (id, action, created_at) values (?, ?, ?)",
                [(old, "test.old", now - 3 * DAY), (recent, "test.recent", now - DAY)],
            )
            conn.execute(
                "insert into service_verification_requests (id, token, identifier, expires_at,"
                " email, nonce, created_at, updated_at) values (?, 't', 'magic_link_login', ?,"
                " 'gone@example.com', 'n', 0, 0)",
                (str(uuid.uuid4()), now - 60),
            )
        metrics_url = f"http://127.0.0.1:{server.metrics_port}/metrics"
        wait_for(lambda: pruned(httpx.get(metrics_url).text, "audit_logs") >= 1)
        wait_for(lambda: pruned(httpx.get(metrics_url).text, "verification_requests") >= 1)
    with sqlite3.connect(database) as conn:
        ids = {row[0] for row in conn.execute("select id from service_audit_logs")}
        requests = conn.execute("select count(*) from service_verification_requests").fetchone()
    assert recent in ids
    assert old not in ids
    assert requests == (0,)
