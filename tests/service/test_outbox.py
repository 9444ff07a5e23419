"""The outbox worker over real databases: delivery, retries, leases, restarts, SMTP outages."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio

from bastion.core.settings import settings_from_flags
from bastion.service.mail import Mail, SmtpMailer
from bastion.service.outbox import OutboxPolicy, OutboxWorker, PermanentFailure
from bastion.storage import Storage, StorageConfig, open_storage, outbox
from bastion.storage.outbox import OutboxItem
from bastion.storage.sql.schema import outbox as outbox_table
from tests.dbfixtures import fresh_postgres_url, fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import free_port

FAST = OutboxPolicy(backoff_base=0.01, backoff_max=0.05, poll_interval=0.05, handler_timeout=2)


@pytest.fixture(params=["sqlite", "postgres"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    if request.param == "sqlite":
        config = StorageConfig(database_type="sqlite", database_url=fresh_sqlite_url(tmp_path))
    else:
        url = await trio.to_thread.run_sync(fresh_postgres_url, "outbox")
        config = StorageConfig(database_type="postgres", database_url=url)
    async with open_storage(config) as st:
        yield st


async def _enqueue(st: Storage, kind: str, payload: dict[str, object]) -> str:
    return await st.db.run(lambda c: outbox.enqueue(c, kind, payload, now=time.time()), write=True)


async def _rows(st: Storage) -> list[sa.Row[tuple[object, ...]]]:
    return await st.db.run(lambda c: c.execute(sa.select(outbox_table)).all())


async def test_enqueue_is_part_of_the_transaction(storage: Storage) -> None:
    def change_then_fail(conn: sa.Connection) -> None:
        outbox.enqueue(conn, "mail", {"to": "x"}, now=time.time())
        raise RuntimeError("the change failed")

    with pytest.raises(RuntimeError):
        await storage.db.run(change_then_fail, write=True)
    assert await _rows(storage) == []


async def test_delivers_then_deletes(storage: Storage) -> None:
    seen: list[dict[str, object]] = []

    async def handler(item: OutboxItem) -> None:
        seen.append(item.payload)

    worker = OutboxWorker(storage.db, {"mail": handler}, FAST)
    await _enqueue(storage, "mail", {"to": "a@b.test"})
    assert await worker.run_once() == 1
    assert seen == [{"to": "a@b.test"}]
    assert await _rows(storage) == []
    assert worker.statistics() == {"delivered": 1, "retried": 0, "failed": 0}


async def test_retries_with_backoff_until_success(storage: Storage) -> None:
    attempts: list[int] = []

    async def flaky(item: OutboxItem) -> None:
        attempts.append(item.attempts)
        if len(attempts) < 3:
            raise ConnectionError("receiver down")

    worker = OutboxWorker(storage.db, {"hook": flaky}, FAST)
    await _enqueue(storage, "hook", {})
    with trio.fail_after(20):
        while worker.delivered == 0:
            await worker.run_once()
            await trio.sleep(0.02)
    assert attempts == [1, 2, 3]
    assert worker.retried == 2


async def test_gives_up_after_max_attempts_and_keeps_the_row(storage: Storage) -> None:
    async def broken(item: OutboxItem) -> None:
        raise ConnectionError("still down")

    policy = OutboxPolicy(max_attempts=3, backoff_base=0.01, backoff_max=0.02, handler_timeout=2)
    worker = OutboxWorker(storage.db, {"hook": broken}, policy)
    await _enqueue(storage, "hook", {})
    with trio.fail_after(20):
        while worker.failed == 0:
            await worker.run_once()
            await trio.sleep(0.02)
    (row,) = await _rows(storage)
    assert row.attempts == 3
    assert row.next_attempt_at is None
    assert row.failed_at is not None
    assert "still down" in row.last_error
    # Never tried again.
    assert await worker.run_once() == 0


async def test_permanent_failure_and_timeout(storage: Storage) -> None:
    async def refuse(item: OutboxItem) -> None:
        raise PermanentFailure("target refused")

    async def hang(item: OutboxItem) -> None:
        await trio.sleep_forever()

    policy = OutboxPolicy(max_attempts=5, backoff_base=0.01, handler_timeout=0.2)
    worker = OutboxWorker(storage.db, {"refuse": refuse, "hang": hang}, policy)
    await _enqueue(storage, "refuse", {})
    await _enqueue(storage, "hang", {})
    await worker.run_once()
    rows = {r.kind: r for r in await _rows(storage)}
    assert rows["refuse"].failed_at is not None
    assert rows["hang"].failed_at is None
    assert "timed out" in rows["hang"].last_error


async def test_two_workers_never_run_one_item_twice(storage: Storage) -> None:
    runs: list[str] = []

    async def handler(item: OutboxItem) -> None:
        runs.append(item.id)
        await trio.sleep(0.01)

    ids = {await _enqueue(storage, "mail", {"n": n}) for n in range(30)}
    workers = [OutboxWorker(storage.db, {"mail": handler}, FAST) for _ in range(2)]
    with trio.fail_after(30):
        while len(runs) < 30:
            async with trio.open_nursery() as nursery:
                for worker in workers:
                    nursery.start_soon(worker.run_once)
    assert sorted(runs) == sorted(ids)


async def test_a_dead_workers_lease_lapses(storage: Storage) -> None:
    await _enqueue(storage, "mail", {})
    # A worker claims the item and dies before settling it.
    claimed = await storage.db.run(
        lambda c: outbox.claim(c, now=time.time(), lease=1.5, limit=10), write=True
    )
    assert len(claimed) == 1
    done: list[int] = []

    async def handler(item: OutboxItem) -> None:
        done.append(item.attempts)

    survivor = OutboxWorker(storage.db, {"mail": handler}, FAST)
    assert await survivor.run_once() == 0
    await trio.sleep(1.6)
    assert await survivor.run_once() == 1
    assert done == [2]


async def test_a_running_items_short_lease_is_renewed_while_it_runs(storage: Storage) -> None:
    policy = OutboxPolicy(lease=1.0, handler_timeout=60, poll_interval=0.05)
    started, release = trio.Event(), trio.Event()
    runs: list[str] = []

    async def slow(item: OutboxItem) -> None:
        runs.append(item.id)
        started.set()
        await release.wait()

    await _enqueue(storage, "mail", {})
    first, second = (OutboxWorker(storage.db, {"mail": slow}, policy) for _ in range(2))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.run_once)
            await started.wait()
            for _ in range(3):  # several lease lengths pass while the item runs
                await trio.sleep(policy.lease)
                assert await second.run_once() == 0
            release.set()
    assert len(runs) == 1
    assert await _rows(storage) == []


async def test_mail_survives_an_smtp_outage(storage: Storage, tmp_path: Path) -> None:
    port = free_port()
    base = settings_from_flags(
        {
            "admin-secret": "a",
            "client-id": "c",
            "client-secret": "s",
            "database-type": "sqlite",
            "database-url": "x.db",
            "jwt-type": "HS256",
            "jwt-secret": "k",
        }
    )
    fields = {name: getattr(base, name) for name in base.__slots__}
    fields.update(smtp_host="127.0.0.1", smtp_port=port, smtp_sender_email="no-reply@b.test")
    mailer = SmtpMailer(type(base)(**fields))

    async def send(item: OutboxItem) -> None:
        await mailer.send(Mail(**item.payload))  # type: ignore[arg-type]

    worker = OutboxWorker(storage.db, {"mail": send}, FAST)
    await _enqueue(storage, "mail", {"to": "ann@b.test", "subject": "Verify", "html": "<p>x</p>"})
    # The relay is down: the attempt fails and the mail stays queued.
    await worker.run_once()
    assert worker.retried == 1
    assert len(await _rows(storage)) == 1
    sink = SpooledMailSink(port, tmp_path / "mail")
    await trio.to_thread.run_sync(sink.start)
    try:
        with trio.fail_after(20):
            while worker.delivered == 0:
                await worker.run_once()
                await trio.sleep(0.02)
        (message,) = await trio.to_thread.run_sync(sink.wait_for, 1)
    finally:
        await trio.to_thread.run_sync(sink.stop)
    assert message["Subject"] == "Verify"
    assert await _rows(storage) == []


async def test_run_loop_wakes_on_demand(storage: Storage) -> None:
    seen = trio.Event()

    async def handler(item: OutboxItem) -> None:
        seen.set()

    worker = OutboxWorker(storage.db, {"mail": handler}, OutboxPolicy(poll_interval=3600))
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
        await trio.sleep(0.05)
        await _enqueue(storage, "mail", {})
        worker.wake()
        with trio.fail_after(10):
            await seen.wait()
        nursery.cancel_scope.cancel()


async def test_an_enqueue_committed_in_this_process_wakes_the_run_loop(storage: Storage) -> None:
    """No explicit wake and an hour-long poll: only the commit notification can run it."""
    seen = trio.Event()

    async def handler(item: OutboxItem) -> None:
        seen.set()

    worker = OutboxWorker(storage.db, {"mail": handler}, OutboxPolicy(poll_interval=3600))
    async with trio.open_nursery() as nursery:
        await nursery.start(worker.run)
        await trio.sleep(0.05)  # let the first (empty) poll settle into its long wait
        await _enqueue(storage, "mail", {})
        with trio.fail_after(30):
            await seen.wait()
        nursery.cancel_scope.cancel()


async def test_only_a_committed_enqueue_notifies(storage: Storage) -> None:
    notified: list[str] = []
    storage.db.on_commit(outbox.ENQUEUED, lambda: notified.append("enqueued"))

    def enqueue_then_fail(conn: sa.Connection) -> None:
        outbox.enqueue(conn, "mail", {}, now=time.time())
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        await storage.db.run(enqueue_then_fail, write=True)
    await _rows(storage)  # a transaction without an enqueue, on the same pooled connection
    assert notified == []
    await _enqueue(storage, "mail", {})
    assert notified == ["enqueued"]
    # Two items in one transaction: one notification.
    await storage.db.run(
        lambda c: [outbox.enqueue(c, "mail", {}, now=time.time()) for _ in range(2)], write=True
    )
    assert notified == ["enqueued", "enqueued"]
