"""Migrations on every database: idempotent, faithful to schema.py, safe to race, and rid
of the previous major version's unique indexes on email / phone_number."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
import trio
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from bastion import storage
from bastion.storage.sql import Database, migrate, open_database
from bastion.storage.sql.migrate import (
    VERSION_TABLE,
    current_revision,
    head_revision,
)
from bastion.storage.sql.schema import metadata, otps, users
from tests.dbfixtures import fresh_database_url
from tests.storage.conftest import DATABASES
from tests.storage.helpers import asyncpg_url, config_for, upgrade_to

IDENTITY = ("email", "phone_number")
#: Where ``storage`` is imported from, for the subprocesses.
SOURCE_ROOT = Path(storage.__file__).resolve().parents[2]


@pytest.fixture(params=DATABASES)
def fresh_db(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, URL) of a new, empty database ("postgres-asyncpg": PostgreSQL's, reached
    through asyncpg)."""
    kind: str = request.param
    if kind == "postgres-asyncpg":
        url = fresh_database_url("postgres", tmp_path, purpose="migrations")
        return "postgres", asyncpg_url(url)
    return kind, fresh_database_url(kind, tmp_path, purpose="migrations")


def schema_differences(conn: sa.Connection) -> list[object]:
    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "version_table": VERSION_TABLE,
            # Other parts of bastion may keep tables of their own in the same database.
            "include_name": lambda name, kind, _parent: kind != "table" or name in metadata.tables,
        },
    )
    return list(compare_metadata(context, metadata))


def unique_indexes_on_identity(conn: sa.Connection, table: str) -> list[str]:
    """Every unique index / constraint of ``table`` touching email or phone_number."""
    found = []
    if conn.dialect.name == "sqlite":
        # PRAGMAs: the inspector skips expression indexes.
        for row in conn.exec_driver_sql(f"PRAGMA index_list({table})").mappings():
            columns = [r[2] for r in conn.exec_driver_sql(f"PRAGMA index_info({row['name']})")]
            sql = conn.execute(
                sa.text("SELECT sql FROM sqlite_master WHERE name = :n"), {"n": row["name"]}
            ).scalar()
            text = " ".join(map(str, columns)) + " " + (sql or "")
            if row["unique"] and any(c in text for c in IDENTITY):
                found.append(row["name"])
        return found
    inspector = sa.inspect(conn)
    for uc in inspector.get_unique_constraints(table):
        if set(uc["column_names"]) & set(IDENTITY):
            found.append(str(uc["name"]))
    for index in inspector.get_indexes(table):
        text = " ".join(map(str, index["column_names"] + list(index.get("expressions", []))))
        if index["unique"] and any(c in text for c in IDENTITY):
            found.append(str(index["name"]))
    return found


def plain_indexes_on_identity(conn: sa.Connection, table: str) -> set[str]:
    return {
        col
        for index in sa.inspect(conn).get_indexes(table)
        if not index["unique"] and len(index["column_names"]) == 1
        for col in index["column_names"]
        if col in IDENTITY
    }


def user(email: str, phone: str) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "email": email,
        "phone_number": phone,
        "signup_methods": "basic_auth",
        "roles": "user",
        "created_at": 1,
        "updated_at": 1,
    }


def otp(email: str, phone: str) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "email": email,
        "phone_number": phone,
        "otp": "hash",
        "expires_at": 2,
        "created_at": 1,
        "updated_at": 1,
    }


async def test_migrations_create_the_schema_and_are_idempotent(fresh_db: tuple[str, str]) -> None:
    kind, url = fresh_db
    async with open_database(config_for(kind, url)) as db:
        first = await migrate(db)
        second = await migrate(db)
        assert (first.from_revision, first.to_revision) == (None, head_revision())
        assert (second.from_revision, second.to_revision) == (head_revision(), head_revision())
        assert first.dropped_unique_indexes == second.dropped_unique_indexes == ()
        assert await db.run(schema_differences) == []
        for table in ("service_users", "service_otps"):
            assert await db.run(lambda c, t=table: unique_indexes_on_identity(c, t)) == []
            assert await db.run(lambda c, t=table: plain_indexes_on_identity(c, t)) == set(IDENTITY)


#: Tables as the previous major version left them: unique email / phone_number, in every
#: form (named table constraint, column constraint, composite, unique index, expression).
LEGACY_DDL = [
    """CREATE TABLE service_users (
        id VARCHAR(36) NOT NULL PRIMARY KEY,
        email VARCHAR(256),
        phone_number VARCHAR(64) UNIQUE,
        password VARCHAR(256),
        roles TEXT,
        created_at BIGINT,
        updated_at BIGINT,
        CONSTRAINT uni_service_users_email UNIQUE (email)
    )""",
    """CREATE TABLE service_otps (
        id VARCHAR(36) NOT NULL PRIMARY KEY,
        email VARCHAR(256),
        phone_number VARCHAR(64),
        otp VARCHAR(256),
        expires_at BIGINT,
        created_at BIGINT,
        updated_at BIGINT,
        UNIQUE (email, phone_number)
    )""",
    "CREATE UNIQUE INDEX idx_service_otps_phone_number ON service_otps (phone_number)",
    "CREATE INDEX idx_service_otps_expires ON service_otps (expires_at)",
]
LEGACY_EXPRESSION_INDEX = (
    "CREATE UNIQUE INDEX idx_users_lower_email ON service_users (lower(email))"
)


async def test_stale_unique_indexes_are_dropped(fresh_db: tuple[str, str]) -> None:
    kind, url = fresh_db
    async with open_database(config_for(kind, url)) as db:

        def create_legacy(conn: sa.Connection) -> None:
            for ddl in LEGACY_DDL:
                conn.exec_driver_sql(ddl)
            if conn.dialect.name != "mysql":  # MariaDB has no expression indexes
                conn.exec_driver_sql(LEGACY_EXPRESSION_INDEX)
            conn.exec_driver_sql(
                "INSERT INTO service_users (id, email, phone_number, roles, created_at, updated_at)"
                " VALUES ('legacy-user', 'a@example.com', '+1555', 'user', 1, 1)"
            )

        await db.run(create_legacy, write=True)
        assert await db.run(lambda c: unique_indexes_on_identity(c, "service_users")) != []

        report = await migrate(db)
        assert report.dropped_unique_indexes != ()
        for table in ("service_users", "service_otps"):
            assert await db.run(lambda c, t=table: unique_indexes_on_identity(c, t)) == []
            assert await db.run(lambda c, t=table: plain_indexes_on_identity(c, t)) == set(IDENTITY)
        assert (await migrate(db)).dropped_unique_indexes == ()
        await assert_duplicates_allowed(db, "a@example.com", "+1555")

        def legacy_row(conn: sa.Connection) -> object:
            return conn.execute(
                sa.select(users.c.email, users.c.phone_number).where(users.c.id == "legacy-user")
            ).one()

        assert await db.run(legacy_row) == ("a@example.com", "+1555")
        # Untouched by the rebuild: the table's other index.
        names = {
            i["name"] for i in await db.run(lambda c: sa.inspect(c).get_indexes("service_otps"))
        }
        assert "idx_service_otps_expires" in names


async def test_unique_index_added_later_is_dropped(fresh_db: tuple[str, str]) -> None:
    kind, url = fresh_db
    async with open_database(config_for(kind, url)) as db:
        await migrate(db)
        await db.run(
            lambda c: c.exec_driver_sql(
                "CREATE UNIQUE INDEX whatever_name ON service_users (email)"
            ),
            write=True,
        )
        report = await migrate(db)
        assert report.dropped_unique_indexes == ("service_users.whatever_name",)
        await assert_duplicates_allowed(db, "b@example.com", "+1666")
        assert await db.run(schema_differences) == []


async def assert_duplicates_allowed(db: Database, email: str, phone: str) -> None:
    def insert(conn: sa.Connection) -> int:
        for _ in range(2):
            conn.execute(sa.insert(users).values(user(email, phone)))
            conn.execute(sa.insert(otps).values(otp(email, phone)))
        return conn.execute(
            sa.select(sa.func.count()).select_from(otps).where(otps.c.email == email)
        ).scalar_one()

    assert await db.run(insert, write=True) == 2


MIGRATE_SCRIPT = """
import sys, trio
from bastion.storage import StorageConfig
from bastion.storage.sql import migrate, open_database

async def main():
    config = StorageConfig(database_type=sys.argv[1], database_url=sys.argv[2])
    async with open_database(config) as db:
        report = await migrate(db)
    print(report.from_revision)

trio.run(main)
"""


async def test_two_instances_migrating_at_once(fresh_db: tuple[str, str]) -> None:
    kind, url = fresh_db
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SOURCE_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    outputs: list[str] = []

    async def instance() -> None:
        result = await trio.run_process(
            [sys.executable, "-c", MIGRATE_SCRIPT, kind, url],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
        assert result.returncode == 0, result.stderr.decode()
        outputs.append(result.stdout.decode().strip())

    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(instance)
            nursery.start_soon(instance)
    # One upgraded from nothing; the other waited for the lock and found the work done.
    assert sorted(outputs) == sorted([str(head_revision()), "None"])
    async with open_database(config_for(kind, url)) as db:
        assert await db.run(current_revision) == head_revision()
        assert await db.run(schema_differences) == []


async def test_addresses_move_to_their_normal_form_and_look_alikes_are_reported(
    fresh_db: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Rows written before revision 0007 (raw spellings): each moves to its normal form,
    except look-alikes of another row, which stay and are reported, never merged."""
    kind, url = fresh_db
    rows = {"solo": "Solo@\uff38.IO.", "one": "twin@x.io", "two": "TWIN@\uff58.io"}
    async with open_database(config_for(kind, url)) as db:
        await db.run(lambda conn: upgrade_to(conn, "0006"), write=True)

        def write_raw(conn: sa.Connection) -> None:
            for user_id, email in rows.items():
                conn.execute(
                    users.insert().values(
                        id=user_id, email=email, roles="user", created_at=0, updated_at=0
                    )
                )

        await db.run(write_raw, write=True)
        with caplog.at_level("WARNING", logger="bastion.migrations"):
            report = await migrate(db)
        assert (report.from_revision, report.to_revision) == ("0006", head_revision())
        stored = dict(await db.run(lambda c: list(c.execute(sa.select(users.c.id, users.c.email)))))
    assert stored == {"solo": "solo@x.io", "one": "twin@x.io", "two": "TWIN@\uff58.io"}
    assert "address of user two is a look-alike of user(s) one" in caplog.text


async def test_several_stores_downgrade_to_the_default_one(fresh_db: tuple[str, str]) -> None:
    """0010 down: the default store's rows stay, other stores go; up again, all is as new."""
    kind, url = fresh_db
    default = "00000000000000000000000000"
    async with open_database(config_for(kind, url)) as db:
        await migrate(db)

        def two_stores(conn: sa.Connection) -> None:
            conn.execute(sa.text("INSERT INTO service_fga_stores VALUES ('S1', 's', 0, 0)"))
            for store in (default, "S1"):
                conn.execute(
                    sa.text(
                        "INSERT INTO service_fga_changelog (store_id, revision, operation, "
                        "created_at) VALUES (:store, 1, 'write', 0)"
                    ),
                    {"store": store},
                )

        await db.run(two_stores, write=True)
        await db.run(lambda conn: upgrade_to(conn, "0007", down=True), write=True)
        count = sa.text("SELECT count(*) FROM service_fga_changelog")
        assert await db.run(lambda conn: conn.execute(count).scalar()) == 1
        await migrate(db)
        assert await db.run(schema_differences) == []
        stores = sa.text("SELECT id FROM service_fga_stores")
        assert await db.run(lambda conn: list(conn.execute(stores).scalars())) == [default]
