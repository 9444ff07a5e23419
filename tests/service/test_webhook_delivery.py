"""Webhook delivery on the outbox, in process, against a real HTTP receiver and real databases:
fan-out, signatures, retries, timeouts, the attempt bound, refused targets, every attempt logged."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import trio

from bastion.service.admin.delivery import WebhookDelivery, WebhookSender, webhook_handlers
from bastion.service.outbox import OutboxPolicy, OutboxWorker
from bastion.storage import Storage, StorageConfig, open_storage, outbox, webhooks
from bastion.storage.sql.database import Database
from bastion.storage.sql.schema import outbox as outbox_table
from tests.dbfixtures import fresh_postgres_url, fresh_sqlite_url
from tests.webhook_receiver import Receiver, receiver

SECRET = "client-secret-for-signing"
FAST = OutboxPolicy(
    max_attempts=3, backoff_base=0.01, backoff_max=0.05, poll_interval=0.05, handler_timeout=5
)
USER = {"id": "u-1", "email": "ada@example.test", "email_verified": True}


@pytest.fixture(params=["sqlite", "postgres"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    if request.param == "sqlite":
        config = StorageConfig(database_type="sqlite", database_url=fresh_sqlite_url(tmp_path))
    else:
        url = await trio.to_thread.run_sync(fresh_postgres_url, "webhooks")
        config = StorageConfig(database_type="postgres", database_url=url)
    async with open_storage(config) as st:
        yield st


@pytest.fixture
def sink() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


#: The database each worker of a test runs on.
_DB: dict[OutboxWorker, Database] = {}


def _worker(st: Storage, *, allow_private: bool = True, timeout: float = 5) -> OutboxWorker:
    sender = WebhookSender(SECRET, allow_private_targets=allow_private, timeout=timeout)
    worker = OutboxWorker(st.db, webhook_handlers(st.db, sender), FAST)
    _DB[worker] = st.db
    return worker


async def _webhook(
    st: Storage, endpoint: str, *, event: str = "user.login", enabled: bool = True, **extra: Any
) -> str:
    return await st.db.run(
        lambda c: webhooks.insert_webhook(
            c,
            event_name=event,
            event_description=extra.get("description", event),
            endpoint=endpoint,
            enabled=enabled,
            headers=extra.get("headers", {}),
            now=int(time.time()),
        ),
        write=True,
    )


async def _event(st: Storage, event: str = "user.login", recipe: str = "basic_auth") -> str:
    payload = {"event_name": event, "user": USER, "auth_recipe": recipe}
    return await st.db.run(
        lambda c: outbox.enqueue(c, "webhook_event", payload, now=time.time()), write=True
    )


async def _drain(worker: OutboxWorker, deadline: float = 30) -> None:
    """Run the worker until nothing is due or pending (failed items stay, parked)."""
    with trio.fail_after(deadline):
        while True:
            await worker.run_once()
            pending = await _DB[worker].run(
                lambda c: c.execute(
                    sa.select(sa.func.count())
                    .select_from(outbox_table)
                    .where(outbox_table.c.next_attempt_at.is_not(None))
                ).scalar_one()
            )
            if pending == 0:
                return
            await trio.sleep(0.02)


async def _logs(st: Storage, webhook_id: str) -> list[dict[str, Any]]:
    rows, _ = await st.db.run(
        lambda c: webhooks.list_logs(c, webhook_id=webhook_id, offset=0, limit=100)
    )
    return rows


async def _outbox_rows(st: Storage) -> list[sa.Row[Any]]:
    return await st.db.run(lambda c: c.execute(sa.select(outbox_table)).all())


async def test_an_event_reaches_every_enabled_webhook_of_it_signed(
    storage: Storage, sink: Receiver
) -> None:
    first = await _webhook(storage, sink.url + "/1", headers={"X-Tenant": "acme"})
    second = await _webhook(storage, sink.url + "/2", description="someone logged in")
    await _webhook(storage, sink.url + "/disabled", enabled=False)
    await _webhook(storage, sink.url + "/other", event="user.deleted")
    await _event(storage)
    worker = _worker(storage)
    await _drain(worker)

    got = sorted(sink.received, key=lambda r: r.path)
    assert [r.path for r in got] == ["/hook/1", "/hook/2"]
    for request, webhook_id in zip(got, (first, second), strict=True):
        assert request.signature_ok(SECRET)
        assert not request.signature_ok("another secret")
        body = request.json
        assert body["webhook_id"] == webhook_id
        assert body["event_name"] == "user.login"
        assert body["user"] == USER
        assert body["auth_recipe"] == "basic_auth"
        assert body["idempotency_key"] == request.headers["x-authorizer-idempotency-key"]
        assert request.headers["content-type"] == "application/json"
    assert got[0].headers["x-tenant"] == "acme"
    assert got[1].json["event_description"] == "someone logged in"
    assert got[0].json["idempotency_key"] != got[1].json["idempotency_key"]
    for webhook_id in (first, second):
        [log] = await _logs(storage, webhook_id)
        assert log["http_status"] == 200
        assert '"received": true' in log["response"]
        assert '"event_name":"user.login"' in log["request"]
    assert await _outbox_rows(storage) == []


async def test_a_tampered_body_or_replayed_old_timestamp_fails_verification(
    storage: Storage, sink: Receiver
) -> None:
    await _webhook(storage, sink.url)
    await _event(storage)
    await _drain(_worker(storage))
    [request] = sink.received
    assert request.signature_ok(SECRET)
    tampered = type(request)(request.path, request.headers, request.body.replace(b"ada", b"eve"))
    assert not tampered.signature_ok(SECRET)
    # A receiver refuses a stale timestamp, which is what makes a captured request useless later.
    assert not request.signature_ok(SECRET, max_age=-1)


async def test_500s_are_retried_with_the_same_idempotency_key_and_every_attempt_logged(
    storage: Storage, sink: Receiver
) -> None:
    sink.script = [(500, 0.0), (503, 0.0)]
    webhook_id = await _webhook(storage, sink.url)
    await _event(storage)
    worker = _worker(storage)
    await _drain(worker)

    assert len(sink.received) == 3
    assert len({r.headers["x-authorizer-idempotency-key"] for r in sink.received}) == 1
    assert all(r.signature_ok(SECRET) for r in sink.received)
    statuses = sorted(log["http_status"] for log in await _logs(storage, webhook_id))
    assert statuses == [200, 500, 503]
    assert await _outbox_rows(storage) == []
    assert worker.statistics()["retried"] == 2


async def test_a_receiver_that_does_not_answer_in_time_is_retried(
    storage: Storage, sink: Receiver
) -> None:
    sink.script = [(200, 3.0)]  # the first answer comes too late
    webhook_id = await _webhook(storage, sink.url)
    await _event(storage)
    # Generous enough that the prompt second answer fits even on a loaded machine.
    await _drain(_worker(storage, timeout=1.5))

    assert len(sink.received) == 2
    logs = await _logs(storage, webhook_id)
    assert sorted(log["http_status"] for log in logs) == [0, 200]
    timed_out = next(log for log in logs if log["http_status"] == 0)
    assert "no answer within 1.5s" in timed_out["response"]
    assert timed_out["request"] == sink.received[0].body.decode()


async def test_never_more_than_the_bounded_attempts(storage: Storage, sink: Receiver) -> None:
    sink.default = (500, 0.0)
    webhook_id = await _webhook(storage, sink.url)
    await _event(storage)
    worker = _worker(storage)
    await _drain(worker)
    for _ in range(5):  # nothing is due any more, however long the worker runs
        await worker.run_once()
        await trio.sleep(0.06)

    assert len(sink.received) == FAST.max_attempts == 3
    assert len(await _logs(storage, webhook_id)) == 3
    [parked] = await _outbox_rows(storage)
    assert parked.kind == "webhook_delivery"
    assert parked.failed_at is not None
    assert parked.next_attempt_at is None
    assert "HTTP 500" in parked.last_error


async def test_a_private_target_is_refused_at_connect_time_and_not_retried(
    storage: Storage, sink: Receiver
) -> None:
    # "localhost" passes the registration check (not a literal address); the connection
    # check resolves it and refuses the loopback address without sending anything.
    webhook_id = await _webhook(storage, f"http://localhost:{sink.port}/hook")
    await _event(storage)
    worker = _worker(storage, allow_private=False)
    await _drain(worker)

    assert sink.received == []
    [log] = await _logs(storage, webhook_id)
    assert log["http_status"] == 0
    assert "refused target" in log["response"]
    assert "loopback" in log["response"]
    [parked] = await _outbox_rows(storage)
    assert parked.attempts == 1
    assert parked.failed_at is not None


async def test_fan_out_settles_the_event_in_its_own_transaction(
    storage: Storage, sink: Receiver
) -> None:
    await _webhook(storage, sink.url)
    await _webhook(storage, sink.url)
    event_id = await _event(storage)
    [claimed] = await storage.db.run(
        lambda c: outbox.claim(c, now=time.time(), lease=60, limit=10), write=True
    )
    sender = WebhookSender(SECRET, allow_private_targets=True)
    # The worker dies right after the fan-out: the event must not come back for a second one.
    await WebhookDelivery(storage.db, sender).fan_out(claimed)
    rows = await _outbox_rows(storage)
    assert claimed.id == event_id
    assert sorted(row.kind for row in rows) == ["webhook_delivery", "webhook_delivery"]


async def test_an_event_without_webhooks_is_simply_settled(storage: Storage) -> None:
    await _event(storage, "user.deleted", recipe="")
    await _drain(_worker(storage))
    assert await _outbox_rows(storage) == []


async def test_a_webhook_deleted_before_delivery_gets_nothing(
    storage: Storage, sink: Receiver
) -> None:
    webhook_id = await _webhook(storage, sink.url)
    await _event(storage)
    worker = _worker(storage)
    [event] = await storage.db.run(
        lambda c: outbox.claim(c, now=time.time(), lease=60, limit=10), write=True
    )
    sender = WebhookSender(SECRET, allow_private_targets=True)
    await WebhookDelivery(storage.db, sender).fan_out(event)
    await storage.db.run(lambda c: webhooks.delete_webhook(c, webhook_id), write=True)
    await _drain(worker)
    assert sink.received == []
    assert await _outbox_rows(storage) == []
