"""The per-process answer to "does some enabled webhook listen for this event?"."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import sqlalchemy as sa
import trio
import trio.testing

from bastion.storage import open_storage, webhooks
from bastion.storage.sql.database import Database
from bastion.storage.webhook_listeners import MAX_AGE, WebhookListeners
from tests.storage.helpers import config_for


def add_webhook(conn: sa.Connection, event_name: str, *, enabled: bool = True) -> str:
    return webhooks.insert_webhook(
        conn,
        event_name=event_name,
        event_description="",
        endpoint="https://hooks.example.com/x",
        enabled=enabled,
        headers={},
        now=int(time.time()),
    )


async def test_answer_is_kept_then_read_again(
    tmp_path: object, mock_clock: trio.testing.MockClock
) -> None:
    """A change made elsewhere shows after MAX_AGE seconds; forget() shows it at once."""
    async with open_storage(config_for("sqlite", f"{tmp_path}/hooks.db")) as storage:
        listeners = WebhookListeners(storage.db)
        event = f"user.login.{uuid.uuid4().hex}"
        assert not await listeners.listening(event)
        # Another instance adds a webhook: this process still has its last answer ...
        hook = await storage.db.run(lambda c: add_webhook(c, event), write=True)
        assert not await listeners.listening(event)
        # ... until that answer is MAX_AGE old.
        mock_clock.jump(MAX_AGE)
        assert await listeners.listening(event)
        # Its own edit (the admin API calls forget) shows at once.
        await storage.db.run(
            lambda c: webhooks.update_webhook(c, hook, {"enabled": False}, now=1), write=True
        )
        assert await listeners.listening(event)
        listeners.forget()
        assert not await listeners.listening(event)


async def test_disabled_webhooks_do_not_listen(tmp_path: object) -> None:
    async with open_storage(config_for("sqlite", f"{tmp_path}/hooks.db")) as storage:
        await storage.db.run(lambda c: add_webhook(c, "user.signup", enabled=False), write=True)
        await storage.db.run(lambda c: add_webhook(c, "user.deleted"), write=True)
        assert await storage.db.read(webhooks.enabled_event_names) == frozenset({"user.deleted"})
        assert not await storage.webhook_listeners.listening("user.signup")
        assert await storage.webhook_listeners.listening("user.deleted")


class _CountingDatabase:
    """Counts reads, and lets the test act while a read is under way."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.reads = 0
        self.during_read: list[Callable[[], None]] = []

    async def read(self, fn: Callable[[sa.Connection], frozenset[str]]) -> frozenset[str]:
        self.reads += 1
        for action in self.during_read:
            action()
        self.during_read.clear()
        return await self.db.read(fn)


async def test_one_read_for_concurrent_askers_and_none_kept_across_an_edit(
    tmp_path: object,
) -> None:
    async with open_storage(config_for("sqlite", f"{tmp_path}/hooks.db")) as storage:
        counting = _CountingDatabase(storage.db)
        listeners = WebhookListeners(counting)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(listeners.listening, "user.login")
        assert counting.reads == 1
        # An edit lands while a read is under way: that read's answer may predate the edit,
        # so it is not kept.
        listeners.forget()
        counting.during_read.append(listeners.forget)
        await listeners.listening("user.login")
        await listeners.listening("user.login")
        assert counting.reads == 3
