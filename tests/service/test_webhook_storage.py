"""The admin surface's storage on every database (SQLite, PostgreSQL, MariaDB): webhooks and
their logs, email templates, and the audit-log query."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio

from bastion.storage import Storage, StorageConfig, email_templates, open_storage, webhooks
from bastion.storage.admin_users import delete_authenticators, delete_otps
from bastion.storage.audit import AuditEntry, record
from bastion.storage.audit_query import AuditFilter, list_audit_logs
from bastion.storage.sql.schema import authenticators, otps
from tests.dbfixtures import fresh_mariadb_url, fresh_postgres_url, fresh_sqlite_url


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    kind: str = request.param
    if kind == "sqlite":
        config = StorageConfig(database_type="sqlite", database_url=fresh_sqlite_url(tmp_path))
    elif kind == "postgres":
        url = await trio.to_thread.run_sync(fresh_postgres_url, "admin_storage")
        config = StorageConfig(database_type="postgres", database_url=url)
    else:
        url = await trio.to_thread.run_sync(fresh_mariadb_url, "admin_storage")
        config = StorageConfig(database_type="mariadb", database_url=url)
    async with open_storage(config) as st:
        yield st


async def _hook(st: Storage, event: str, *, enabled: bool = True, at: int = 1000) -> str:
    return await st.db.run(
        lambda c: webhooks.insert_webhook(
            c,
            event_name=event,
            event_description=f"{event} happened",
            endpoint=f"https://hooks.example.test/{event}",
            enabled=enabled,
            headers={"X-Key": "v"},
            now=at,
        ),
        write=True,
    )


async def test_several_webhooks_per_event_and_their_lookup(storage: Storage) -> None:
    first = await _hook(storage, "user.login", at=1000)
    second = await _hook(storage, "user.login", at=1001)
    await _hook(storage, "user.login", enabled=False)
    await _hook(storage, "user.signup")
    found = await storage.db.run(lambda c: webhooks.enabled_for_event(c, "user.login"))
    assert [hook["id"] for hook in found] == [first, second]
    assert found[0] == {
        "id": first,
        "event_name": "user.login",
        "event_description": "user.login happened",
        "endpoint": "https://hooks.example.test/user.login",
        "enabled": True,
        "headers": {"X-Key": "v"},
        "created_at": 1000,
        "updated_at": 1000,
    }
    assert await storage.db.run(lambda c: webhooks.enabled_for_event(c, "user.deleted")) == []


async def test_update_list_and_delete_with_logs(storage: Storage) -> None:
    hook = await _hook(storage, "user.login")
    other = await _hook(storage, "user.deleted", at=2000)
    changed = await storage.db.run(
        lambda c: webhooks.update_webhook(
            c, hook, {"endpoint": "https://new.example.test", "headers": {}, "enabled": False},
            now=3000,
        ),
        write=True,
    )  # fmt: skip
    assert changed
    got = await storage.db.run(lambda c: webhooks.get_webhook(c, hook))
    assert got is not None
    assert (got["endpoint"], got["headers"], got["enabled"], got["updated_at"]) == (
        "https://new.example.test", {}, False, 3000,
    )  # fmt: skip
    missing = await storage.db.run(
        lambda c: webhooks.update_webhook(c, "nope", {"enabled": True}, now=1), write=True
    )
    assert not missing

    rows, total = await storage.db.run(lambda c: webhooks.list_webhooks(c, offset=0, limit=1))
    assert total == 2
    assert [r["id"] for r in rows] == [other]  # newest first
    rows, _ = await storage.db.run(lambda c: webhooks.list_webhooks(c, offset=1, limit=1))
    assert [r["id"] for r in rows] == [hook]

    for n, status in enumerate((500, 0, 200)):
        await storage.db.run(
            lambda c, n=n, status=status: webhooks.insert_log(
                c, webhook_id=hook, http_status=status, request="{}", response=f"r{n}",
                now=4000 + n,
            ),
            write=True,
        )  # fmt: skip
    await storage.db.run(
        lambda c: webhooks.insert_log(
            c, webhook_id=other, http_status=200, request="{}", response="", now=5000
        ),
        write=True,
    )
    logs, total = await storage.db.run(
        lambda c: webhooks.list_logs(c, webhook_id=hook, offset=0, limit=10)
    )
    assert total == 3
    assert [log["http_status"] for log in logs] == [200, 0, 500]
    _, everything = await storage.db.run(
        lambda c: webhooks.list_logs(c, webhook_id=None, offset=0, limit=10)
    )
    assert everything == 4

    assert await storage.db.run(lambda c: webhooks.delete_webhook(c, hook), write=True)
    _, left = await storage.db.run(
        lambda c: webhooks.list_logs(c, webhook_id=hook, offset=0, limit=10)
    )
    assert left == 0
    assert not await storage.db.run(lambda c: webhooks.delete_webhook(c, hook), write=True)


async def test_email_templates(storage: Storage) -> None:
    template_id = await storage.db.run(
        lambda c: email_templates.insert_template(
            c, event_name="verify_otp", subject="s", template="<p>{{.otp}}</p>", design="",
            now=10,
        ),
        write=True,
    )  # fmt: skip
    assert await storage.db.run(lambda c: email_templates.event_taken(c, "verify_otp"))
    assert not await storage.db.run(
        lambda c: email_templates.event_taken(c, "verify_otp", other_than=template_id)
    )
    # One template per event, whatever the application checks first.
    with pytest.raises(sa.exc.IntegrityError):
        await storage.db.run(
            lambda c: email_templates.insert_template(
                c, event_name="verify_otp", subject="x", template="y", design="", now=11
            ),
            write=True,
        )
    await storage.db.run(
        lambda c: email_templates.update_template(c, template_id, {"subject": "t"}, now=12),
        write=True,
    )
    found = await storage.db.run(lambda c: email_templates.template_for_event(c, "verify_otp"))
    assert found is not None
    assert (found["subject"], found["updated_at"]) == ("t", 12)
    rows, total = await storage.db.run(
        lambda c: email_templates.list_templates(c, offset=0, limit=10)
    )
    assert (total, rows[0]["id"]) == (1, template_id)
    assert await storage.db.run(
        lambda c: email_templates.delete_template(c, template_id), write=True
    )
    assert await storage.db.run(lambda c: email_templates.get_template(c, template_id)) is None


async def test_audit_query_filters_and_order(storage: Storage) -> None:
    def entries(conn: sa.Connection) -> None:
        for n, (action, kind, ident, actor) in enumerate(
            [
                ("admin.webhook_created", "webhook", "w1", "admin"),
                ("admin.webhook_updated", "webhook", "w1", "admin"),
                ("user.login_success", "user", "u1", "u1"),
                ("admin.webhook_deleted", "webhook", "w2", "admin"),
            ]
        ):
            entry = AuditEntry(
                action=action, actor_id=actor, resource_type=kind, resource_id=ident,
                protocol="rest",
            )  # fmt: skip
            record(conn, entry, now=100 + n)

    await storage.db.run(entries, write=True)

    async def query(where: AuditFilter, offset: int = 0, limit: int = 10) -> tuple[list[str], int]:
        rows, total = await storage.db.run(
            lambda c: list_audit_logs(c, where, offset=offset, limit=limit)
        )
        return [r["action"] for r in rows], total

    everything, total = await query(AuditFilter())
    assert total == 4
    assert everything[0] == "admin.webhook_deleted"  # newest first
    assert await query(AuditFilter(resource_type="webhook", resource_id="w1")) == (
        ["admin.webhook_updated", "admin.webhook_created"], 2,
    )  # fmt: skip
    assert await query(AuditFilter(actor_id="u1")) == (["user.login_success"], 1)
    assert await query(AuditFilter(action="admin.webhook_created")) == (
        ["admin.webhook_created"], 1,
    )  # fmt: skip
    assert (await query(AuditFilter(from_timestamp=101, to_timestamp=102)))[1] == 2
    assert await query(AuditFilter(), offset=3, limit=10) == (["admin.webhook_created"], 4)
    assert await query(AuditFilter(), offset=10, limit=10) == ([], 4)


async def test_user_cleanup_helpers(storage: Storage) -> None:
    now = int(time.time())

    def seed(conn: sa.Connection) -> None:
        for n, (email, phone) in enumerate(
            [("a@example.test", None), (None, "+15550000001"), ("b@example.test", None)]
        ):
            conn.execute(
                otps.insert().values(
                    id=f"otp-{n}", email=email, phone_number=phone, otp="h", expires_at=now,
                    created_at=now, updated_at=now,
                )
            )  # fmt: skip
        conn.execute(
            authenticators.insert().values(
                id="auth-1", user_id="u1", method="totp", created_at=now, updated_at=now
            )
        )

    await storage.db.run(seed, write=True)
    removed = await storage.db.run(
        lambda c: delete_otps(c, email="a@example.test", phone_number="+15550000001"), write=True
    )
    assert removed == 2
    assert (
        await storage.db.run(lambda c: delete_otps(c, email=None, phone_number=None), write=True)
        == 0
    )
    assert await storage.db.run(lambda c: delete_authenticators(c, "u1"), write=True) == 1
    left = await storage.db.run(lambda c: c.execute(sa.select(otps.c.id)).scalars().all())
    assert left == ["otp-2"]
