"""The session store over a real SQLite database and the in-process memory store: the
memory-store layout, families, the replaced-refresh record, and the SQL-side marker."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import trio
import trio.testing

from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.settings import settings_from_flags
from bastion.service.auth.sessions import (
    ACCESS,
    REFRESH,
    SESSION,
    USER_AGENT_LIMIT,
    Lifetimes,
    SessionStore,
)
from bastion.storage import Storage, open_storage
from bastion.storage import users as user_rows
from bastion.storage_config import storage_config

LIFETIMES = Lifetimes(session=600, access=300, refresh=900)


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    settings = settings_from_flags(
        {
            "admin-secret": "a",
            "client-id": "c",
            "client-secret": "s",
            "database-type": "sqlite",
            "database-url": str(tmp_path / "sessions.db"),
            "memory-store-url": "memory://",
            "jwt-type": "HS256",
            "jwt-secret": "x" * 32,
        }
    )
    async with open_storage(storage_config(settings)) as opened:
        yield opened


def _tokens(nonce: str, *, refresh: bool = True) -> IssuedTokens:
    return IssuedTokens(
        nonce=nonce,
        access_token=f"access-{nonce}",
        id_token=f"id-{nonce}",
        refresh_token=f"refresh-{nonce}" if refresh else None,
        session_token=f"session-{nonce}",
        expires_in=300,
    )


async def test_sessions_families_and_users_end_by_prefix(storage: Storage) -> None:
    store = SessionStore(storage, LIFETIMES)
    await store.persist("u1", "f1", _tokens("n1"))
    await store.persist("u1", "f1", _tokens("n2", refresh=False))
    await store.persist("u1", "f2", _tokens("n3"))
    await store.persist("u2", "f4", _tokens("n4"))
    assert await store.get("u1", "f1", "n1", SESSION) == "session-n1"
    assert await store.get("u1", "f1", "n2", REFRESH) is None
    await store.delete("u1", "f1", "n2")
    assert await store.get("u1", "f1", "n2", ACCESS) is None
    await store.end_family("u1", "f1")
    assert await store.get("u1", "f1", "n1", ACCESS) is None
    assert await store.get("u1", "f2", "n3", ACCESS) == "access-n3"
    await store.persist("u1", "f5", _tokens("n5"))
    await store.end_memory_sessions("u1", keep=("f5", "n5"))
    assert await store.get("u1", "f2", "n3", ACCESS) is None
    assert await store.get("u1", "f5", "n5", REFRESH) == "refresh-n5"
    await store.end_memory_sessions("u1")
    assert await store.get("u1", "f5", "n5", SESSION) is None
    assert await store.get("u2", "f4", "n4", SESSION) == "session-n4"


async def test_a_replaced_refresh_token_is_remembered_once(storage: Storage) -> None:
    store = SessionStore(storage, LIFETIMES)
    assert await store.replaced("u1", "f1", "n1") is None
    await store.remember_replaced("u1", "f1", "n1", "refresh-old")
    first = await store.replaced("u1", "f1", "n1")
    await store.remember_replaced("u1", "f1", "n1", "refresh-other")
    again = await store.replaced("u1", "f1", "n1")
    assert first is not None
    assert again == first
    assert first.token == "refresh-old"


async def test_the_sql_marker_and_revocation_refuse_older_tokens(storage: Storage) -> None:
    store = SessionStore(storage, LIFETIMES)
    user = User(id="u9", email="u9@example.com", roles=("user",), created_at=100, updated_at=100)
    await storage.db.run(lambda conn: user_rows.insert(conn, user), write=True)
    assert await store.accepts("u9", 50)
    assert not await store.accepts("u9", "50")
    assert not await store.accepts("nobody", 50)
    await storage.db.run(
        lambda conn: user_rows.end_sessions_marker(conn, "u9", valid_after=200), write=True
    )
    assert await store.accepts("u9", 50)  # still cached: the cache is the documented window
    store.forget_status("u9")
    assert not await store.accepts("u9", 199)
    assert await store.accepts("u9", 200)
    await storage.db.run(
        lambda conn: user_rows.end_sessions_marker(conn, "u9", valid_after=150), write=True
    )
    store.forget_status("u9")
    assert not await store.accepts("u9", 199)  # the marker never moves back
    revoked = dataclasses.replace(user, revoked_timestamp=300)
    await storage.db.run(lambda conn: user_rows.update(conn, revoked), write=True)
    store.forget_status("u9")
    assert not await store.accepts("u9", 400)


async def test_user_repository_round_trip(storage: Storage) -> None:
    """bastion/storage/users.py: what the flows and the admin operations read and write."""
    ada = User(
        id="a1",
        email="ada@example.com",
        phone_number="+15550003333",
        roles=("user", "editor"),
        signup_methods=("basic_auth",),
        app_data={"plan": "pro"},
        password_hash="$argon2id$x",
        created_at=10,
        updated_at=10,
    )
    bob = User(id="b1", email="bob@example.com", created_at=20, updated_at=20)

    def write(conn: sa.Connection) -> tuple[str | None, str | None, str | None]:
        return (
            user_rows.insert_unique(conn, ada),
            user_rows.insert_unique(conn, dataclasses.replace(ada, id="a2")),
            user_rows.insert_unique(
                conn, dataclasses.replace(bob, phone_number="+15550003333", email="b@x.co")
            ),
        )

    assert await storage.db.run(write, write=True) == (None, "email", "phone_number")
    await storage.db.run(lambda conn: user_rows.insert(conn, bob), write=True)
    by_email = await storage.db.run(lambda conn: user_rows.get_by_email(conn, "ADA@example.com "))
    by_phone = await storage.db.run(lambda conn: user_rows.get_by_phone(conn, "+15550003333"))
    assert by_email == by_phone == ada
    assert by_email is not None
    assert by_email.password_hash == "$argon2id$x"
    page, total = await storage.db.run(lambda conn: user_rows.list_page(conn, limit=1, offset=0))
    assert total == 2
    assert [u.id for u in page] == ["b1"]
    assert await storage.db.run(lambda conn: user_rows.delete(conn, "b1"), write=True)
    assert await storage.db.run(lambda conn: user_rows.get_by_id(conn, "b1")) is None
    assert not await storage.db.run(
        lambda conn: user_rows.email_taken(conn, "ada@example.com", exclude_id="a1")
    )


async def test_the_listing_follows_logins_rotations_and_every_way_a_session_ends(
    storage: Storage,
) -> None:
    store = SessionStore(storage, LIFETIMES)
    await store.persist("u1", "f1", _tokens("n1"), ip="203.0.113.1", user_agent="A" * 500)
    await store.persist("u1", "f2", _tokens("n2"), ip="203.0.113.2", user_agent="Phone")
    await store.persist("u2", "f9", _tokens("n9"))
    listed = await store.listing("u1")
    assert [(s.id, s.ip, s.nonce) for s in listed] == [
        ("f1", "203.0.113.1", "n1"),
        ("f2", "203.0.113.2", "n2"),
    ]
    assert listed[0].user_agent == "A" * USER_AGENT_LIMIT
    # A rotation keeps the row (and its creation), with the new nonce and address.
    await store.delete("u1", "f1", "n1")
    await store.persist("u1", "f1", _tokens("n3"), ip="203.0.113.3", user_agent="Laptop")
    rotated = (await store.listing("u1"))[0]
    assert (rotated.id, rotated.nonce, rotated.ip) == ("f1", "n3", "203.0.113.3")
    assert rotated.created_at == listed[0].created_at
    # A logout (its tokens deleted) leaves the listing and the index.
    await store.delete("u1", "f2", "n2")
    assert [s.id for s in await store.listing("u1")] == ["f1"]
    assert await storage.memory.index_members(store.index_key("u1")) == ["f1"]
    # Another user's session is not ours to revoke; our own goes with all its tokens.
    assert await store.revoke_family("u1", "f9") is False
    assert await store.get("u2", "f9", "n9", ACCESS) == "access-n9"
    await store.persist("u1", "f4", _tokens("n4"))
    assert await store.revoke_family("u1", "f4") is True
    assert await store.get("u1", "f4", "n4", REFRESH) is None
    assert await store.revoke_family("u1", "f4") is False
    # Signing out everywhere but here keeps this session listed; everywhere ends the list.
    await store.persist("u1", "f5", _tokens("n5"))
    await store.end_memory_sessions("u1", keep=("f1", "n3"))
    assert [s.id for s in await store.listing("u1")] == ["f1"]
    await store.end_memory_sessions("u1")
    assert await store.listing("u1") == []
    assert [s.id for s in await store.listing("u2")] == ["f9"]


class HeldReads:
    """The session store's database, its reads counted; each read's answer, once read,
    is held until the test lets it go (the n-th read, from 0)."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.read_done: list[trio.Event] = []
        self.gates: list[trio.Event] = []

    @property
    def reads(self) -> int:
        return len(self.gates)

    async def read(self, fn: Callable[[sa.Connection], Any], **kwargs: Any) -> Any:
        done, gate = trio.Event(), trio.Event()
        self.read_done.append(done)
        self.gates.append(gate)
        found = await self._db.read(fn, **kwargs)
        done.set()
        await gate.wait()
        return found

    async def release(self, index: int) -> None:
        await self.read_done[index].wait()
        self.gates[index].set()
        await trio.testing.wait_all_tasks_blocked()


async def _status_user(storage: Storage) -> None:
    user = User(id="u9", email="u9@example.com", roles=("user",), created_at=100, updated_at=100)
    await storage.db.run(lambda conn: user_rows.insert(conn, user), write=True)


async def test_requests_that_miss_the_status_together_share_one_read(storage: Storage) -> None:
    await _status_user(storage)
    store = SessionStore(storage, LIFETIMES)
    held = store.db = HeldReads(storage.db)  # type: ignore[assignment]
    answers: list[bool] = []

    async def ask() -> None:
        answers.append(await store.accepts("u9", 150))

    with trio.fail_after(10):  # a read per request: seven never end
        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            await held.release(0)
    assert answers == [True] * 8
    assert held.reads == 1


async def test_a_status_read_begun_before_a_change_is_not_kept(storage: Storage) -> None:
    """A read in flight when forget_status comes (a change was written) answers its own
    caller, but nobody joins it and it does not refill the cache, even when it ends
    after the read that followed the change."""
    await _status_user(storage)
    store = SessionStore(storage, LIFETIMES)
    held = store.db = HeldReads(storage.db)  # type: ignore[assignment]
    answers: dict[str, bool] = {}

    async def ask(name: str) -> None:
        answers[name] = await store.accepts("u9", 150)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "before")
            await trio.testing.wait_all_tasks_blocked()
            await held.read_done[0].wait()  # its read has the old status
            await storage.db.run(
                lambda conn: user_rows.end_sessions_marker(conn, "u9", valid_after=200),
                write=True,
            )
            store.forget_status("u9")
            nursery.start_soon(ask, "after")
            await trio.testing.wait_all_tasks_blocked()
            await held.release(1)  # the read after the change ends first...
            await held.release(0)  # ...the one before it last
    assert answers == {"before": True, "after": False}
    assert held.reads == 2
    assert not await store.accepts("u9", 150)  # the cache holds the later read
    assert held.reads == 2
