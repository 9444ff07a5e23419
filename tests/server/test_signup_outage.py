"""A request answered with an error changed nothing (issue 27): with the memory store (a
Redis of the test's own) stopped, a signup answers 503 and leaves no user row, webhook or
audit row behind; the identical retry once Redis is back signs up, and the account then
has its row, its webhooks and its audit row, each once. A login in the outage answers 503
and records no sign-in; its retry does, once."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

from tests.dbfixtures import fresh_postgres_url
from tests.redis_topologies import start_redis
from tests.server.harness import ADMIN_SECRET, base_flags, free_port, running

PASSWORD = "Outage!pass1"


def _stored(dsn: str, email: str) -> tuple[int, int, int]:
    """The account's user rows, queued webhooks and signup audit rows. A queued event is
    a ``webhook_event`` until the outbox fans it out into one ``webhook_delivery`` per
    listening webhook (one each here), in one transaction: counting both never races it."""
    with psycopg.connect(dsn) as conn:
        users = conn.execute("select id from service_users where email = %s", (email,)).fetchall()
        webhooks = conn.execute(
            "select count(*) from service_outbox"
            " where kind in ('webhook_event', 'webhook_delivery') and payload like %s",
            (f"%{email}%",),
        ).fetchone()
        audits = conn.execute(
            "select count(*) from service_audit_logs where action = 'user.signup'"
            " and actor_email = %s",
            (email,),
        ).fetchone()
    assert webhooks is not None
    assert audits is not None
    return len(users), int(webhooks[0]), int(audits[0])


def test_signup_and_login_during_a_memory_store_outage_leave_nothing_and_retries_succeed(
    tmp_path: Path,
) -> None:
    url = fresh_postgres_url("outage")
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    redis_port = free_port()
    redis = start_redis(tmp_path / "redis", port=redis_port)
    flags = [
        *base_flags("postgres", url),
        f"--memory-store-url=redis://127.0.0.1:{redis_port}/0",
        "--webhook-allow-private-targets",
    ]
    email = f"outage-{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    nowhere = f"http://127.0.0.1:{free_port()}/hook"  # deliveries fail: the rows stay queued
    try:
        with (
            running(flags, tmp_path) as server,
            httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=60) as http,
        ):
            for event in ("user.created", "user.signup"):
                webhook = {"event_name": event, "endpoint": nowhere, "enabled": True}
                added = http.post("/v1/admin/add_webhook", json=webhook, headers=admin)
                assert added.status_code == 200, added.text

            redis.stop()
            refused = http.post("/v1/signup", json=body)
            assert refused.status_code == 503, refused.text
            assert _stored(dsn, email) == (0, 0, 0)

            redis = start_redis(tmp_path / "redis", port=redis_port)
            retried = http.post("/v1/signup", json=body)
            assert retried.status_code == 200, retried.text
            assert _stored(dsn, email) == (1, 2, 1)

            credentials = {"email": email, "password": PASSWORD}
            redis.stop()
            assert http.post("/v1/login", json=credentials).status_code == 503
            assert _logins(dsn, email) == 0
            redis = start_redis(tmp_path / "redis", port=redis_port)
            logged_in = http.post("/v1/login", json=credentials)
            assert logged_in.status_code == 200, logged_in.text
    finally:
        redis.stop()
    assert _logins(dsn, email) == 1


def _logins(dsn: str, email: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "select count(*) from service_audit_logs where action = 'user.login_success'"
            " and actor_email = %s",
            (email,),
        ).fetchone()
    assert row is not None
    return int(row[0])
